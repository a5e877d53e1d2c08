#!/bin/sh
# run-tests.sh BIN... — run Criterion test binaries, then tests/cli/*.sh;
# print a summary, exit non-zero if any failed.  Sets XDG dirs to temporary
# directories so no test reads or writes the user's config or cache.
set -u
fail=0; n=0; failed=""
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME="$tmp/config" XDG_CACHE_HOME="$tmp/cache"
export MXP_MANIFEST="${MXP_MANIFEST:-$BUILD/plugins/manifest.yaml}"
mkdir -p "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"
for t in "$@"; do
    n=$((n + 1))
    if ! "$t" --jobs=2 -q; then
        fail=$((fail + 1)); failed="$failed $t"
        echo "FAILED: $t" >&2
    fi
done
if [ -z "${SANITIZE:-}" ]; then
    for s in tests/cli/*.sh; do
        [ -f "$s" ] || continue
        n=$((n + 1))
        if ! BUILD="$BUILD" sh "$s"; then
            fail=$((fail + 1)); failed="$failed $s"
            echo "FAILED: $s" >&2
        fi
    done
fi
echo "run-tests: $((n - fail))/$n test programs passed"
[ "$fail" -eq 0 ] || { echo "failed:$failed" >&2; exit 1; }
