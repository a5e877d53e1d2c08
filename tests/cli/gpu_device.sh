#!/bin/sh
# gpu_device.sh — `--device` of `mxplug train`, `score` and `predict`:
#   bad specs are usage errors (exit 2); on a machine without a GPU (no
#   driver, or the ops-cuda pack not built) asking for gpu:0 is exit 1 with
#   one line naming the device and why, before any data is read, and
#   nothing is written; --device cpu passes.  (CPU training itself is
#   train_predict.sh's.)
# On a machine with a GPU the no-GPU checks are skipped (make test-gpu
# covers training there).
. "$(dirname "$0")/lib/common.sh"

D=/usr/share/datasets/fashion-mnist
NET="$ROOT/examples/mlp/mlp-symbol.json"

# --- usage errors ----------------------------------------------------------
for bad in tpu gpu:x gpu:-1 "gpu:" "gpu(2" cpu:1x; do
    run 2 "$MXPLUG" train --net "$NET" --data "mnist:$D" --device "$bad"
    has "$TMP/err" "--device '$bad'"
done
run 0 "$MXPLUG" train --help
has "$TMP/out" "--device DEV"
run 0 "$MXPLUG" score --help
has "$TMP/out" "--device DEV"
run 0 "$MXPLUG" predict --help
has "$TMP/out" "--device DEV"

# --- no GPU here: a clear error, exit 1, no crash, nothing written -----------
run 0 "$MXPLUG" packs --load
cp "$TMP/out" "$TMP/packs"
if grep -q "device gpu: available, [1-9]" "$TMP/packs"; then
    echo "gpu_device: a GPU is present; the no-GPU checks are skipped"
else
    for dev in gpu gpu:0 "gpu(0)"; do
        run 1 "$MXPLUG" train --net "$NET" --data "mnist:$D" --device "$dev" --epochs 1 --model-prefix "$TMP/m"
        has "$TMP/err" "train: --device gpu:0: "
        if grep -q "libmxp-ops-cuda.so" "$TMP/packs"; then
            has "$TMP/err" "no CUDA device (driver reports 0)"
            has "$TMP/err" "cudaGetDeviceCount says"
        else
            has "$TMP/err" "no pack provides device 'gpu'"
        fi
        [ ! -e "$TMP/m-symbol.json" ] || fail "a failed --device run wrote a checkpoint"
    done
    run 1 "$MXPLUG" train --net "$NET" --data "mnist:$D" --device gpu:3 --epochs 1 --model-prefix "$TMP/m"
    has "$TMP/err" "--device gpu:3"
    run 1 "$MXPLUG" score --model "$TMP/m" --epoch 1 --data "mnist:$D" --device gpu:0
    has "$TMP/err" "score: --device gpu:0: "
    run 1 "$MXPLUG" predict --model "$TMP/m" --epoch 1 --input "$TMP/none.npy" --device gpu:1
    has "$TMP/err" "predict: --device gpu:1: "
fi

# --- --device cpu passes the device check (the missing data is what fails) ----
run 1 "$MXPLUG" train --net "$NET" --data "mnist:$TMP/nodata" --device cpu:0 --epochs 1 --model-prefix "$TMP/c"
hasnt "$TMP/err" "--device"
has "$TMP/err" "$TMP/nodata"
echo "gpu_device: ok"
