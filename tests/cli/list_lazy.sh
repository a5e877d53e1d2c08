#!/bin/sh
# list_lazy.sh — `mxplug list` answers from manifests without opening any
# .so: a manifest naming a garbage "library" lists fine (and the dynamic
# loader never sees the file, per LD_DEBUG=files), while `list --loaded`
# and `check` report the failure naming the pack and the file; a healthy
# pack found beside it still checks ok.
. "$(dirname "$0")/lib/common.sh"

garbage=$(manifest garbage)
export MXP_MANIFEST="$garbage"

run 0 env LD_DEBUG=files "$MXPLUG" list
has "$TMP/out" "fx_garbage_op"
has "$TMP/out" "fx-garbage"
hasnt "$TMP/err" "not_a_library.so"   # no dlopen attempt, no error

run 0 "$MXPLUG" list --json
has "$TMP/out" '"fx_garbage_op"'
if command -v jq >/dev/null 2>&1; then
    [ "$(jq -r '.ops[0].impls[0].device' "$TMP/out")" = cpu ] || fail "list --json: bad impl device"
fi

run 0 "$MXPLUG" packs
has "$TMP/out" "not loaded"

run "!0" "$MXPLUG" list --loaded
has "$TMP/out" "fx_garbage_op"        # still lists
has "$TMP/err" "fx-garbage"
has "$TMP/err" "not_a_library.so"

run "!0" "$MXPLUG" check "$garbage"
has "$TMP/err" "fx-garbage"
has "$TMP/err" "not_a_library.so"

# Beside a healthy pack: the failure is reported, the other pack is ok.
mkdir -p "$TMP/d1" "$TMP/d2"
cp "$garbage" "$TMP/d1/manifest.yaml"
cp "$(manifest fx_control)" "$TMP/d2/manifest.yaml"
unset MXP_MANIFEST
export MXP_PLUGIN_PATH="$TMP/d1:$TMP/d2"
run "!0" "$MXPLUG" check
has "$TMP/err" "fx-garbage"
has "$TMP/out" "fx-control"
run 0 "$MXPLUG" info fx_control_op
has "$TMP/out" "Fixture op fx_control_op"
echo "list_lazy: ok"
