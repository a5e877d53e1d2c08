#!/bin/sh
# bench/train/run.sh — `make bench-train`: LeNet and MLP on Fashion-MNIST,
# mxplug (bench.c: symbol JSON from examples/, mxp_module_fit) next to the
# same nets in PyTorch (torch_train.py), in one run, data in memory on both
# sides: batch 64, SGD momentum 0.9, lr 0.01 (x0.1 from epoch 9 of 10),
# EPOCHS epochs (default 10),
# 2 threads (MXP_NUM_THREADS=2 / torch.set_num_threads(2),
# OPENBLAS_NUM_THREADS=1), flush-to-zero on the PyTorch side.
# PyTorch runs twice, with OMP_WAIT_POLICY=passive and =active (libgomp's
# default), and mxplug is compared with the faster of the two: on a shared,
# loaded machine libgomp's spinning threads made the MLP ~15x slower
# (3,900 vs 46,000 samples/s side by side), on a quiet one active was the
# faster (issue 19).  OMP_WAIT_POLICY set in the environment runs that
# setting only.
# Paired runs: mxplug initializes its weights (seed SEED) and writes them,
# with the sample order of every batch of every epoch, to a scratch
# directory (BENCH_SHARE_DIR); PyTorch starts from those weights and feeds
# the batches in that order.  Both sides then run the same experiment and
# differ only in arithmetic, so the accuracy gap measures the
# implementations rather than two draws of the seed (unpaired, LeNet's
# test accuracy moves by +-0.3 points from seed to seed on either side).
# mxplug runs with MXP_IMPL_Convolution=tune (unless the environment sets
# it): each convolution layer gets the implementation timed fastest on its
# own shapes, the counterpart of PyTorch's best settings; the tune cache
# starts empty in a scratch directory, and training's tuning runs in the
# first batch.  Both sides time from the end of their first batch (warm-up
# left out on both) and print it as first=<s> (ResNet-20: mxplug ~1.6 s
# with its tuning, PyTorch ~0.2 s); inference's tuning runs in the score,
# after the timed span.
# NET-bf16 (e.g. lenet-bf16): the same net in bfloat16 mixed precision,
# mxplug as `train --dtype bfloat16` (BENCH_DTYPE=bfloat16) next to
# PyTorch's torch.autocast("cpu", dtype=torch.bfloat16) (TORCH_AUTOCAST=bf16);
# its line compares with the fp32 line of NET in the same run.
# resnet20: examples/resnet/resnet20-symbol.json next to the same ResNet-20
# in PyTorch (torch_train.py ResNet20, parameters matched by name), the
# images zero-padded to 32x32 (BENCH_INPUT=32), RESNET_EPOCHS epochs
# (default 1) over the first RESNET_LIMIT training images (default 19200 =
# 300 batches; 0 = all 60,000): a fraction of an epoch keeps the run to a
# few minutes per side, and both sides see the same images in the same
# order from the same weights, so the accuracies stay comparable.  Its lr
# drops x0.1 for the last third of the updates (LR_STEPS, read by both
# sides; MultiFactorScheduler semantics): paired runs agree to ~1e-7 at the
# first steps but diverge chaotically (ResNet-20: ~10% relative parameter
# distance after 100 steps, the same between two mxplug convolution impls
# as between mxplug and PyTorch), and at a constant lr the test accuracy
# after 300 batches moved by 1.4-2.3 points between runs that differ only
# in float rounding (mxplug gemm / winograd / tune, PyTorch with its initial
# weights scaled by 1 + 2^-22); with the drop such runs spanned 0.53
# points (docs/bench-train-accuracy.md).
# Diagnosis: BENCH_DUMP=DIR makes both sides write their trained
# parameters and aux states there (mxplug.txt/.bin, torch.txt/.bin);
# compare_params.py DIR mxplug DIR torch prints their relative distance.
# Env: BUILD (absolute build dir, set by make), EPOCHS, DATA, NETS ("lenet mlp lenet-bf16 resnet20 resnet20-bf16"), SEED,
# RESNET_EPOCHS, RESNET_LIMIT.
# Last lines, one per net:
#   train <lenet|mlp|lenet-bf16|resnet20> mxplug_sps=<x> torch_sps=<y> mxplug_acc=<a> torch_acc=<b> torch_passive_sps=<p> torch_active_sps=<q>
# torch_sps / torch_acc are the faster setting's; x/y is the speed-up.
set -eu
BUILD=${BUILD:?set BUILD to the build directory}
EPOCHS=${EPOCHS:-10}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
NETS=${NETS:-lenet mlp lenet-bf16 resnet20 resnet20-bf16}
SEED=${SEED:-1}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$BUILD/bench/train"
[ -x "$bin" ] || { echo "run.sh: $bin missing (make bench-train builds it)" >&2; exit 1; }
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} dataset-fashion-mnist python3-torch" "$root/tools/install-deps.sh" --if-missing
export MXP_MANIFEST="${MXP_MANIFEST:-$BUILD/plugins/manifest.yaml}"
POLICIES=${OMP_WAIT_POLICY:-passive active}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MXP_IMPL_Convolution=${MXP_IMPL_Convolution:-tune}
export XDG_CACHE_HOME="$tmp/cache"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$2"; }
echo "bench-train: $EPOCHS epochs, batch 64, SGD momentum 0.9 lr 0.01 (x0.1 from epoch 9), 2 threads, Convolution impl policy $MXP_IMPL_Convolution, data $DATA"
for net in $NETS; do
    base=${net%-bf16} dt= ac=
    [ "$base" = "$net" ] || { dt=bfloat16; ac=bf16; }
    json="$root/examples/$base/$base-symbol.json" epochs=$EPOCHS
    export BENCH_INPUT= TRAIN_LIMIT= LR_STEPS=
    if [ "$base" = resnet20 ]; then
        json="$root/examples/resnet/resnet20-symbol.json" epochs=${RESNET_EPOCHS:-1}
        BENCH_INPUT=32 TRAIN_LIMIT=${RESNET_LIMIT:-19200}
        n=$TRAIN_LIMIT; [ "$n" -gt 0 ] && [ "$n" -lt 60000 ] || n=60000
        LR_STEPS=$((n / 64 * epochs * 2 / 3))
        [ "$LR_STEPS" -gt 0 ] || LR_STEPS=
        echo "$net: $epochs epoch(s) over the first ${TRAIN_LIMIT} training images (0 = all), 32x32 (zero-padded), lr x0.1 after update ${LR_STEPS:-none}"
    fi
    mkdir -p "$tmp/share-$net"
    export BENCH_SHARE_DIR="$tmp/share-$net"
    BENCH_DTYPE=$dt MXP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 "$bin" "$json" "$DATA" "$epochs" "$SEED" | tee "$tmp/$net.mx" | sed "s/^/$net: /"
    for pol in $POLICIES; do
        OMP_WAIT_POLICY=$pol TORCH_AUTOCAST=$ac THREADS=2 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$here/torch_train.py" "$base" "$DATA" "$epochs" "$SEED" \
            | tee "$tmp/$net.torch.$pol" | sed "s/^/$net: OMP_WAIT_POLICY=$pol /"
    done
    # The faster setting's output is the one compared.
    best=; best_sps=-1
    for pol in $POLICIES; do
        v=$(field sps "$tmp/$net.torch.$pol")
        if awk -v a="${v:-0}" -v b="$best_sps" 'BEGIN { exit !(a > b) }'; then best=$pol; best_sps=${v:-0}; fi
    done
    cp "$tmp/$net.torch.$best" "$tmp/$net.torch"
    p=$(field mem_planned "$tmp/$net.mx"); n=$(field mem_naive "$tmp/$net.mx")
    awk -v p="$p" -v n="$n" -v net="$net" 'BEGIN { if (n > 0) printf "%s: training memory (batch 64, intermediates) planned %.2f MiB vs naive %.2f MiB (%.0f%%)\n", net, p/1048576, n/1048576, 100*p/n }'
done
for net in $NETS; do
    extra=
    for pol in $POLICIES; do extra="$extra torch_${pol}_sps=$(field sps "$tmp/$net.torch.$pol")"; done
    echo "train $net mxplug_sps=$(field sps "$tmp/$net.mx") torch_sps=$(field sps "$tmp/$net.torch") mxplug_acc=$(field acc "$tmp/$net.mx") torch_acc=$(field acc "$tmp/$net.torch")$extra"
done
