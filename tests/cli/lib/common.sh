# tests/cli/lib/common.sh — sourced by tests/cli/*.sh (kept in lib/ so the
# runner, which runs tests/cli/*.sh, does not run it as a test).
# Gives: ROOT (source tree), BUILD (absolute build dir, from the runner),
# MXPLUG, FIX (built fixture packs), TMP (removed on exit), and helpers:
#   manifest NAME        instantiate tests/fixtures/manifests/NAME.yaml into
#                        $TMP (placeholders -> absolute paths); prints path
#   run RC CMD...        run CMD, stdout -> $TMP/out, stderr -> $TMP/err;
#                        fail unless its exit status is RC ("!0": non-zero)
#   has FILE TEXT        fail unless FILE contains TEXT (fixed string)
#   hasnt FILE TEXT      fail if it does
#   need_fashion_mnist   set DATA to Fashion-MNIST's directory (MXP_DATA, else
#                        the Debian package's, installed when missing)
set -eu
: "${BUILD:?set BUILD to the absolute build directory}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MXPLUG="$BUILD/bin/mxplug"
FIX="$BUILD/tests/fixtures"
TEST_NAME=$(basename "$0" .sh)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Never read or write the user's config/cache.
export XDG_CONFIG_HOME="$TMP/config" XDG_CACHE_HOME="$TMP/cache"
unset MXP_PLUGIN_PATH MXP_PACKS 2>/dev/null || true

fail() {
    echo "FAIL [$TEST_NAME]: $*" >&2
    for f in out err; do
        [ -s "$TMP/$f" ] && { echo "--- std$f of the last command:" >&2; sed 's/^/  /' "$TMP/$f" >&2; }
    done
    exit 1
}

manifest() {
    sed -e "s|@FIXTURES@|$FIX|g" -e "s|@SRCFIXTURES@|$ROOT/tests/fixtures|g" \
        "$ROOT/tests/fixtures/manifests/$1.yaml" > "$TMP/$1.yaml"
    echo "$TMP/$1.yaml"
}

run() {
    want=$1; shift
    set +e
    "$@" > "$TMP/out" 2> "$TMP/err"
    got=$?
    set -e
    if [ "$want" = "!0" ]; then
        [ "$got" -ne 0 ] || fail "expected failure, got exit 0: $*"
    else
        [ "$got" -eq "$want" ] || fail "expected exit $want, got $got: $*"
    fi
}

has() { grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks '$2'"; }
hasnt() { ! grep -qF -- "$2" "$1" || fail "$(basename "$1") unexpectedly contains '$2'"; }

need_fashion_mnist() {
    DATA=${MXP_DATA:-/usr/share/datasets/fashion-mnist}
    if [ ! -d "$DATA" ]; then
        MXP_EXTRA_DEPS="dataset-fashion-mnist" "$ROOT/tools/install-deps.sh" --if-missing >/dev/null 2>&1 || true
    fi
    [ -d "$DATA" ] || fail "Fashion-MNIST not found in $DATA (Debian package dataset-fashion-mnist)"
}

[ -x "$MXPLUG" ] || fail "$MXPLUG not built"
