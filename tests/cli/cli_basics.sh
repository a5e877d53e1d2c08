#!/bin/sh
# cli_basics.sh — the mxplug CLI end to end on fixture packs:
#   --help for the tool and every command; unknown / reserved commands;
#   `check` on every failure fixture (non-zero, naming the pack) and on the
#   must-load ones (zero); `manifest gen` round trip on the mock accelerator
#   (generated entry -> manifest -> check ok -> list shows device mock);
#   `info` (params, inputs, impls, --why); `impl` show / set / env / unset.
. "$(dirname "$0")/lib/common.sh"

# --- help everywhere ------------------------------------------------------
run 0 "$MXPLUG" --help
for c in list info packs check manifest impl train predict score bench; do has "$TMP/out" "$c"; done
for c in list info packs check manifest impl; do
    run 0 "$MXPLUG" "$c" --help
    has "$TMP/out" "usage: mxplug $c"
done
run 0 "$MXPLUG" help info
has "$TMP/out" "usage: mxplug info"
run 2 "$MXPLUG" no-such-command
has "$TMP/err" "unknown command"
run 2 "$MXPLUG" bench   # every reserved command is implemented now: usage error
has "$TMP/err" "missing OP"
run 2 "$MXPLUG" list --bogus
run 2 "$MXPLUG" info

# --- check on every fixture -------------------------------------------------
check_fails() { # check_fails MANIFEST PACK TEXT...
    m=$(manifest "$1"); pack=$2; shift 2
    run "!0" "$MXPLUG" check "$m"
    has "$TMP/err" "$pack"
    for t in "$@"; do has "$TMP/err" "$t"; done
}
check_fails bad_abi_major fx-bad-abi-major bad_abi_major.so
check_fails min_host_minor fx-min-host-minor min_host_minor.so
check_fails no_entry fx-no-entry mxp_plugin_v1
check_fails init_fails fx-init-fails "simulated device probe failure (code 7)"
check_fails dup_self fx-dup-self fx_dup_self
check_fails orphan_impl fx-orphan-impl fx_nobody
check_fails undeclared fx-undeclared fx_sneaky
check_fails missing_decl fx-missing-decl fx_promised
check_fails garbage fx-garbage not_a_library.so
check_fails sha256_mismatch fx-dep-a sha256
check_fails missing_dep fx-dep-a fx-no-such-pack
check_fails dep_cycle fx-dep-a fx-dep-b
for ok in fx_control newer_minor truncated mock_accel; do
    run 0 "$MXPLUG" check "$(manifest $ok)"
    has "$TMP/out" "0 problem(s)"
done

# --- manifest gen round trip (mock accelerator) -------------------------------
run 0 "$MXPLUG" manifest gen "$FIX/mock_accel.so"
has "$TMP/out" "mock-accel"
has "$TMP/out" "mock_scale"
has "$TMP/out" "mock"
mkdir -p "$TMP/gen"
cp "$FIX/mock_accel.so" "$TMP/gen/"
{ echo "manifest_version: 1"; echo "packs:"; sed 's/^/  /' "$TMP/out"; } > "$TMP/gen/manifest.yaml"
run 0 "$MXPLUG" check "$TMP/gen/manifest.yaml"
export MXP_MANIFEST="$TMP/gen/manifest.yaml"
run 0 "$MXPLUG" list --pack mock-accel
has "$TMP/out" "mock_scale"
has "$TMP/out" "device mock"
run 0 "$MXPLUG" list --json --pack mock-accel
has "$TMP/out" '"device": "mock"'
run 1 "$MXPLUG" list --pack no-such-pack

# --- info ---------------------------------------------------------------------
run 0 "$MXPLUG" info mock_scale
has "$TMP/out" "scale"
has "$TMP/out" "default=2.0"
has "$TMP/out" "inputs: data"
has "$TMP/out" "reference"
run 0 "$MXPLUG" info mock_scale --why --shape data=2,3 --param scale=3
has "$TMP/out" "why"
has "$TMP/out" "reference"
# On the mock device, its own impl wins (the device registered by the pack).
run 0 "$MXPLUG" info mock_scale --why --device mock --shape data=4
has "$TMP/out" "device mock"
grep -q "mock .*CHOSEN" "$TMP/out" || fail "mock impl not chosen on device mock"
run 1 "$MXPLUG" info no_such_op
has "$TMP/err" "no_such_op"

# --- impl: show, persist, env override, reject, unset --------------------------
run 0 "$MXPLUG" impl mock_scale
has "$TMP/out" "auto"
run 0 "$MXPLUG" impl mock_scale reference
run 0 "$MXPLUG" impl mock_scale
has "$TMP/out" "policy reference (from config)"
run 0 env MXP_IMPL_mock_scale=mock "$MXPLUG" impl mock_scale
has "$TMP/out" "policy mock (from env)"
run 1 "$MXPLUG" impl mock_scale bogus
has "$TMP/err" "no implementation 'bogus'"
run 0 "$MXPLUG" impl mock_scale --unset
run 0 "$MXPLUG" impl mock_scale
has "$TMP/out" "auto"
echo "cli_basics: ok"
