#!/bin/sh
# harden_inputs.sh — inputs that used to hang or overflow (issue 12 §1, §5):
#   a manifest that is a FIFO (MXP_MANIFEST or `check`), a directory, a pack
#   library that is /dev/zero with a sha256 (hashed forever), a FIFO given
#   to `manifest gen` (dlopen blocked): each fails at once naming the file
#   and what it is; `bench --shape` with an element count whose byte size
#   overflows, and with 12 dimensions (was silently cut to 8): usage errors.
# Every command runs under `timeout`, so a regression fails instead of hanging.
. "$(dirname "$0")/lib/common.sh"
T="timeout 30"

mkfifo "$TMP/fifo.yaml"
MXP_MANIFEST="$TMP/fifo.yaml" run 1 $T "$MXPLUG" packs --load
has "$TMP/err" "fifo.yaml"
has "$TMP/err" "a FIFO"
run "!0" $T "$MXPLUG" check "$TMP/fifo.yaml"
has "$TMP/err" "a FIFO"

mkdir "$TMP/mdir"
MXP_MANIFEST="$TMP/mdir" run 1 $T "$MXPLUG" packs
has "$TMP/err" "a directory"
hasnt "$TMP/err" "empty manifest"

cat > "$TMP/zero.yaml" <<YAML
manifest_version: 1
packs:
  - name: fx-zero
    version: 0.0.1
    abi: {major: 1, minor: 0, min_host_minor: 0}
    library: /dev/zero
    sha256: 0000000000000000000000000000000000000000000000000000000000000000
    load: lazy
    provides:
      ops:
        - name: fx_zero_op
          impls: [{name: default, device: cpu, rank: 256}]
YAML
run "!0" $T "$MXPLUG" check "$TMP/zero.yaml"
has "$TMP/err" "/dev/zero"
has "$TMP/err" "a character device"

run 1 $T "$MXPLUG" manifest gen "$TMP/fifo.yaml"
has "$TMP/err" "a FIFO"

run 2 $T "$MXPLUG" bench Activation --shape data=2305843009213693953 --param act_type=relu
has "$TMP/err" "do not fit in memory"
run 2 $T "$MXPLUG" bench Activation --shape data=1,2,3,4,5,6,7,8,9,10,11,12 --param act_type=relu
has "$TMP/err" "more than 8 dimensions"
run 2 $T "$MXPLUG" bench Activation --shape data=4,-3 --param act_type=relu
has "$TMP/err" "bad shape"
echo "harden_inputs: ok"
