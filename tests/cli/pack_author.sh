#!/bin/sh
# pack_author.sh — the frictions a pack author hit (issue 11 §3, §4), each
# checked against the built tool: a bare library name for `manifest gen`;
# `manifest gen` refusing an impl of an op no manifest defines; path
# mistakes in MXP_PLUGIN_PATH / MXP_MANIFEST named as such; misspelled implementation
# names (`train --impl`, MXP_IMPL_*) reported at start with the valid ones;
# and a preference list ("winograd,auto") accepted.
. "$(dirname "$0")/lib/common.sh"

# manifest gen with a bare name: a file in the current directory.
cd "$FIX"
run 0 "$MXPLUG" manifest gen ex_thirdparty.so
has "$TMP/out" "name: thirdparty"
has "$TMP/out" "{op: Convolution, name: naive"
run 1 "$MXPLUG" manifest gen no_such_pack.so
has "$TMP/err" "./no_such_pack.so"
# An impl of an op nobody defines is refused now, not at `check` time.
run 1 "$MXPLUG" manifest gen orphan_impl.so
has "$TMP/err" "fx_nobody"
has "$TMP/err" "neither this pack nor any pack in the manifests defines"
cd "$ROOT"

# MXP_PLUGIN_PATH names directories; MXP_MANIFEST names files.
run 0 env MXP_PLUGIN_PATH="$FIX/ex_thirdparty.so" "$MXPLUG" list
has "$TMP/err" "is a file: a directory (holding manifest.yaml) is expected"
run "!0" env MXP_MANIFEST="$FIX" "$MXPLUG" list
has "$TMP/err" "is a directory: a manifest file is expected"

# Misspelled implementation names, before any training starts.
NET="$ROOT/examples/lenet/lenet-symbol.json"
run 2 "$MXPLUG" train --net "$NET" --data mnist:"$TMP" --impl Convolution=winogard
has "$TMP/err" "winogard"
has "$TMP/err" "valid: "
has "$TMP/err" "winograd"
run 2 env MXP_IMPL_Convolution=gemmm "$MXPLUG" train --net "$NET" --data mnist:"$TMP"
has "$TMP/err" "MXP_IMPL_Convolution"
has "$TMP/err" "gemmm"
run 2 env MXP_IMPL_Convolutoin=gemm "$MXPLUG" train --net "$NET" --data mnist:"$TMP"
has "$TMP/err" "no op named 'Convolutoin'"
run 2 "$MXPLUG" train --net "$NET" --data mnist:"$TMP" --impl Convolution=auto,gemm
has "$TMP/err" "after 'auto'/'tune'"
# A preference list: winograd where it applies (3x3), else the best other.
run 0 env MXP_IMPL_Convolution=winograd,auto "$MXPLUG" info Convolution --why --shape data=1,2,9,9 --param kernel=5,5 --param num_filter=4
has "$TMP/out" "then 'auto'"
hasnt "$TMP/out" "winograd     rank  320  pack ops-nn          CHOSEN"
has "$TMP/out" "CHOSEN (highest rank that accepts)"
run 0 env MXP_IMPL_Convolution=winograd,auto "$MXPLUG" info Convolution --why --shape data=1,2,9,9 --param kernel=3,3 --param num_filter=4
has "$TMP/out" "CHOSEN (named by policy)"
echo "pack_author: ok"
