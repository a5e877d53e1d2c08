#!/bin/sh
# check-exports.sh DIR — every pack (DIR/*.so) must export exactly one
# defined dynamic symbol: its entry point mxp_plugin_v1.  Packs are built
# with -fvisibility=hidden; anything else exported would leak into the
# global namespace of a process that loads several packs.  Fixture packs
# (which break the rules on purpose) are not checked.  With no packs yet,
# says so and succeeds.
set -u
dir=${1:?usage: check-exports.sh DIR}
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
if [ "$n" -eq 0 ]; then echo "check-exports: no packs in $dir yet (skipped)"; exit 0; fi
[ "$bad" -eq 0 ] && echo "check-exports: $n pack(s) export only $ENTRY"
[ "$bad" -eq 0 ]
