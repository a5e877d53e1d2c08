#!/bin/sh
# demo.sh BUILD — what `make demo` runs after building.
# Installs the demo's extra Debian data (dataset-fashion-mnist, via
# tools/install-deps.sh with MXP_EXTRA_DEPS, only if missing), then trains
# LeNet (examples/lenet/lenet-symbol.json) for 2 epochs on Fashion-MNIST
# with `mxplug train` (live progress on a terminal, one line per epoch
# otherwise), checkpoints into $BUILD/demo/lenet-*, and scores the final
# checkpoint on the 10,000 test images with `mxplug score`.
# DEMO_EPOCHS overrides the epoch count; MXP_DATA the data directory.
set -eu
build=${1:-$(pwd)/build}
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} dataset-fashion-mnist" tools/install-deps.sh --if-missing
export MXP_MANIFEST="${MXP_MANIFEST:-$build/plugins/manifest.yaml}"
data=${MXP_DATA:-/usr/share/datasets/fashion-mnist}
epochs=${DEMO_EPOCHS:-2}
mxplug="$build/bin/mxplug"
out="$build/demo"
mkdir -p "$out"
echo "demo: training LeNet on Fashion-MNIST ($data) for $epochs epochs, 2 threads"
start=$(date +%s)
"$mxplug" train --net examples/lenet/lenet-symbol.json --data "mnist:$data" \
    --epochs "$epochs" --batch-size 64 --optimizer sgd --lr 0.01 --momentum 0.9 \
    --seed 1 --model-prefix "$out/lenet"
end=$(date +%s)
echo "demo: training took $((end - start)) s (wall clock, including validation)"
"$mxplug" score --model "$out/lenet" --epoch "$epochs" --data "mnist:$data"
echo "demo: checkpoint $out/lenet-symbol.json, $out/lenet-$(printf %04d "$epochs").params"
