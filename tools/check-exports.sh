#!/bin/sh
# check-exports.sh DIR — every pack (DIR/*.so) must export exactly one
# defined dynamic symbol: its entry point mxp_plugin_v1.  Packs are built
# with -fvisibility=hidden; anything else exported would leak into the
# global namespace of a process that loads several packs.  Fixture packs
# (which break the rules on purpose) are not checked.  With no packs yet,
# says so and succeeds.
set -u
dir=${1:?usage: check-exports.sh DIR [LIB.a [LIB.so]]}
ENTRY=mxp_plugin_v1
n=0; bad=0
for so in "$dir"/*.so; do
    [ -f "$so" ] || continue
    n=$((n + 1))
    # Field 3 is the name in "ADDR TYPE NAME"; versioned names get "@..." cut.
    syms=$(nm -D --defined-only "$so" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
    extra=$(printf '%s\n' "$syms" | grep -vx "$ENTRY" | grep -v '^$' || true)
    if ! printf '%s\n' "$syms" | grep -qx "$ENTRY"; then
        echo "check-exports: $so does not export $ENTRY" >&2; bad=$((bad + 1))
    elif [ -n "$extra" ]; then
        echo "check-exports: $so exports more than $ENTRY:" $extra >&2; bad=$((bad + 1))
    fi
done
# check-exports.sh DIR LIB.a [LIB.so] — a static libmxplug.a is linked into
# applications, so every global symbol it defines must carry the library's
# prefix: mxp_ (public API) or mxp__ (internals), never an application's
# name (eng_get, g_reg).  With LIB.so, a single-underscore mxp_ name must
# also be one the shared library exports (public), else it is an internal
# that should be mxp__.
static_bad=0
if [ $# -ge 2 ] && [ -f "$2" ]; then
    lib=$2
    # Sanitizer builds add their own globals per instrumented variable
    # (__odr_asan.NAME under ASan); they are the compiler's, not ours.
    globals=$(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 { print $3 }' \
              | grep -v '^__odr_asan[._]' | grep -v '^__\(asan\|tsan\|ubsan\|sancov\)_' | sort -u)
    foreign=$(printf '%s\n' "$globals" | grep -v '^mxp_' | grep -v '^$' || true)
    if [ -n "$foreign" ]; then
        echo "check-exports: $lib defines global symbols without the mxp_/mxp__ prefix:" $foreign >&2
        static_bad=1
    fi
    if [ $# -ge 3 ] && [ -f "$3" ]; then
        exported=$(nm -D --defined-only "$3" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
        public=$(printf '%s\n' "$globals" | grep '^mxp_[^_]' || true)
        hidden=$(printf '%s\n' "$public" | grep -vxF "$exported" | grep -v '^$' || true)
        if [ -n "$hidden" ]; then
            echo "check-exports: $lib: internal symbols named like public API (rename to mxp__...):" $hidden >&2
            static_bad=1
        fi
    fi
    [ "$static_bad" -eq 0 ] && echo "check-exports: $lib defines only mxp_/mxp__ globals"
fi
if [ "$n" -eq 0 ]; then echo "check-exports: no packs in $dir yet (skipped)"; exit "$static_bad"; fi
[ "$bad" -eq 0 ] && echo "check-exports: $n pack(s) export only $ENTRY"
[ "$bad" -eq 0 ] && [ "$static_bad" -eq 0 ]
