#!/bin/sh
# demo-resnet.sh BUILD — what `make demo-resnet` runs after building (not
# part of `make test` or `make demo`: an epoch of ResNet-20 takes minutes).
# Packs Fashion-MNIST as JPEG records with `mxplug im2rec --from-mnist`
# (shorter side resized 28 -> 36, quality 95; train and t10k sets, into
# $BUILD/demo-resnet/fm_{train,val}.rec + .idx, kept between runs), then
# trains examples/resnet/resnet20-symbol.json with `mxplug train --data
# rec:...`: ImageRecordIter crops 32x32 at random positions (--rand-crop)
# and mirrors half of the images (--rand-mirror); validation uses the
# centre crop.  SGD momentum 0.9, lr 0.05, batch 64.  One line per epoch
# with the validation accuracy.
# DEMO_EPOCHS (default 1), MXP_DATA (the IDX directory) override.
set -eu
build=${1:-$(pwd)/build}
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} dataset-fashion-mnist" tools/install-deps.sh --if-missing
export MXP_MANIFEST="${MXP_MANIFEST:-$build/plugins/manifest.yaml}"
data=${MXP_DATA:-/usr/share/datasets/fashion-mnist}
epochs=${DEMO_EPOCHS:-1}
mxplug="$build/bin/mxplug"
out="$build/demo-resnet"
mkdir -p "$out"
for set in train:train t10k:val; do
    src=${set%%:*} dst=${set##*:}
    [ -s "$out/fm_$dst.rec" ] && [ -s "$out/fm_$dst.idx" ] || \
        "$mxplug" im2rec --from-mnist "$data" "$out/fm_$dst" --set "$src" --encoding .jpg --quality 95 \
            --resize 36 --num-thread 2
done
echo "demo-resnet: training ResNet-20 on Fashion-MNIST JPEG records for $epochs epoch(s), 32x32 random crops + mirror"
start=$(date +%s)
"$mxplug" train --net examples/resnet/resnet20-symbol.json --data "rec:$out/fm" --data-shape 1,32,32 \
    --rand-crop --rand-mirror --epochs "$epochs" --batch-size 64 --optimizer sgd --lr 0.05 --momentum 0.9 \
    --wd 0.0001 --seed 1 --model-prefix "$out/resnet20"
end=$(date +%s)
echo "demo-resnet: training took $((end - start)) s (wall clock, including validation)"
