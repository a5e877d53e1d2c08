#!/bin/sh
# features.sh — iterators, kvstore types and devices shown like ops:
# `mxplug list --kind iter|kvstore|device|all` answers from the manifests
# alone (no pack opened), and `mxplug info MNISTIter` loads io-image and
# prints its parameter schema.  Expected values are MXNet's documented
# MNISTIter parameters (batch_size default 128, shuffle default True), not
# read back from our own output.
. "$(dirname "$0")/lib/common.sh"
unset MXP_MANIFEST 2>/dev/null || true

run 0 env LD_DEBUG=files "$MXPLUG" list --kind iter
has "$TMP/out" "MNISTIter"
has "$TMP/out" "ImageRecordIter"
has "$TMP/out" "[pack io-image]"
hasnt "$TMP/err" "libmxp-io-image.so"   # listing opened no pack

run 0 "$MXPLUG" list --kind kvstore
has "$TMP/out" "local"
has "$TMP/out" "dist_sync"
hasnt "$TMP/out" "MNISTIter"
hasnt "$TMP/out" "Convolution"

run 0 "$MXPLUG" list --kind all
has "$TMP/out" "Convolution"
has "$TMP/out" "MNISTIter"
has "$TMP/out" "devices:"

run 0 "$MXPLUG" list --kind device --json
has "$TMP/out" '"devices"'
has "$TMP/out" '"cpu"'
hasnt "$TMP/out" '"ops"'

run 2 "$MXPLUG" list --kind iterations
has "$TMP/err" "unknown --kind 'iterations'"

run 0 "$MXPLUG" info MNISTIter
has "$TMP/out" "MNISTIter (iterator)"
has "$TMP/out" "pack: io-image"
grep -Eq '^  batch_size +int .*default=128$' "$TMP/out" || fail "info MNISTIter: batch_size line"
grep -Eq '^  shuffle +boolean, default=True$' "$TMP/out" || fail "info MNISTIter: shuffle line"

run 0 "$MXPLUG" info local
has "$TMP/out" "local (kvstore)"
has "$TMP/out" "pack: runtime"

run 1 "$MXPLUG" info NoSuchThing
has "$TMP/err" "no op, iterator, kvstore type or device named 'NoSuchThing'"
echo "features: ok"
