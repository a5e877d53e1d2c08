#!/bin/sh
# harden_inputs.sh — inputs that used to hang or overflow (issue 12 §1, §5):
#   a manifest that is a FIFO (MXP_MANIFEST or `check`), a directory, a pack
#   library that is /dev/zero with a sha256 (hashed forever), a FIFO given
#   to `manifest gen` (dlopen blocked): each fails at once naming the file
#   and what it is; `bench --shape` with an element count whose byte size
#   overflows, and with 12 dimensions (was silently cut to 8): usage errors.
#   A validation label outside [0, classes) names the files, the epoch, the
#   batch and the label (was only "label 12 outside [0, 10)").
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
# A bad validation label: IDX files written here with struct (independent of
# the reader); label 12 in the second validation batch of 4.
mkdir -p "$TMP/badlab"
/usr/bin/python3 - "$TMP/badlab" <<'PYEOF' || fail "writing the IDX files"
import struct, sys
d = sys.argv[1]
def write(split, n, bad_at=None):
    with open(f"{d}/{split}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 784)))
    labels = bytearray(i % 10 for i in range(n))
    if bad_at is not None:
        labels[bad_at] = 12
    with open(f"{d}/{split}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
write("train", 8)
write("t10k", 8, bad_at=5)
PYEOF
run 1 $T "$MXPLUG" train --net "$ROOT/examples/mlp/mlp-symbol.json" --data "mnist:$TMP/badlab" --epochs 1 \
    --batch-size 4 --no-progress --model-prefix "$TMP/badlab/m"
has "$TMP/err" "t10k-labels-idx1-ubyte"
has "$TMP/err" "epoch 0 (validation data): batch 1"
has "$TMP/err" "label 12 outside [0, 10)"
[ ! -e "$TMP/badlab/m-0001.params" ] || fail "a checkpoint was written after the validation error"

# A denormal learning rate: refused at start (it failed mid-training with
# "cannot parse '9.99e-321' as float" from the optimizer op).
run 2 $T "$MXPLUG" train --net "$ROOT/examples/mlp/mlp-symbol.json" --data "mnist:$TMP/badlab" --lr 1e-320
has "$TMP/err" "smallest normal float32"
hasnt "$TMP/err" "cannot parse"

# An empty (8,0) input (written by numpy): named as such, checked before the
# model is read (the message ended in an empty reason).
/usr/bin/python3 -c "import numpy, sys; numpy.save(sys.argv[1], numpy.zeros((8, 0), numpy.float32))" \
    "$TMP/empty.npy" || fail "numpy"
run 1 $T "$MXPLUG" predict --model "$TMP/no-such-model" --epoch 1 --input "$TMP/empty.npy"
has "$TMP/err" "empty.npy' is empty: dimension 1 of its shape is 0"
# Option values go through tools/mxplug/cli_args.c (fuzz_cli_args): a shape
# `info --why` used to explain with the bad dimension dropped, a --repeat
# that overflowed atoi, a --param with an empty key: all usage errors now.
run 2 $T "$MXPLUG" info Activation --why --shape data=4,-3 --param act_type=relu
has "$TMP/err" "bad shape 'data=4,-3'"
run 2 $T "$MXPLUG" bench Activation --shape data=4 --param act_type=relu --repeat 99999999999
has "$TMP/err" "--repeat: '99999999999' is not an integer"
run 2 $T "$MXPLUG" bench Activation --shape data=4 --param =relu
has "$TMP/err" "--param wants KEY=VALUE, got '=relu'"
# bench's own allocation failing (3.2 GB of float64 inputs under a 2.9 GB
# address-space limit): exit 1 with a message (stderr was empty).  Not under
# sanitizers, whose shadow memory needs the address space.
if [ -z "${SANITIZE:-}" ]; then
    run 1 sh -c "ulimit -v 3000000; exec $T '$MXPLUG' bench Activation --shape data=400000000 --param act_type=relu"
    has "$TMP/err" "out of memory for 400000000 float64 values"
fi
echo "harden_inputs: ok"
