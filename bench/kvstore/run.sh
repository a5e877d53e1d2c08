#!/bin/sh
# bench/kvstore/run.sh — `make bench-kvstore`: dist_sync pushpull against a raw
# MPI_Allreduce of the same bytes (2 ranks, one host, TCP on loopback) for
# small arrays (4 KiB, 64 KiB: latency-bound) and large ones (4, 16, 64 MiB:
# bandwidth-bound), one LeNet parameter set as a step, and LeNet training
# with 1 and 2 workers.
# Closing lines (the format other tools parse):
#   kvstore pushpull_<size> mxplug_gbps=<x> mpi_gbps=<y>
#   kvstore train_lenet workers=2 sps=<x> single_sps=<y>
# GB/s are algorithm bandwidth (bytes of the array / seconds per call, 1e9).
# sps are samples/s summed over workers, with one core per worker.  KV_BENCH_REPS (default 10) and
# KV_BENCH_BATCHES (LeNet batches of 64 per worker per epoch, default 50).
set -eu
: "${BUILD:=$(pwd)/build}"
BIN="$BUILD/bench/kvstore"
export MXP_MANIFEST="${MXP_MANIFEST:-$BUILD/plugins/manifest.yaml}"
REPS="${KV_BENCH_REPS:-10}"
BATCHES="${KV_BENCH_BATCHES:-50}"
DATA="${MXP_DATA:-/usr/share/datasets/fashion-mnist}"
NET="$(cd "$(dirname "$0")/../.." && pwd)/examples/lenet/lenet-symbol.json"
if ! command -v mpirun >/dev/null 2>&1 || [ ! -f "$BUILD/plugins/libmxp-kvstore-dist.so" ]; then
    echo "bench-kvstore: skipped: Open MPI (mpirun) or the kvstore-dist pack is absent"
    exit 0
fi
MPI="mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
MPI_CORE="mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to core --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x MXP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1"
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | head -1; }
echo "bench-kvstore: 2 ranks on $(hostname) ($(nproc) cores), TCP loopback, median of $REPS"
lines=""
# label:MiB:repetitions (small arrays are cheap: more repetitions)
for case in 4KiB:0.00390625:$((REPS * 20)) 64KiB:0.0625:$((REPS * 10)) 4MiB:4:$REPS 16MiB:16:$REPS 64MiB:64:$REPS; do
    label=${case%%:*}; rest=${case#*:}; mib=${rest%%:*}; reps=${rest#*:}
    kv=$($MPI "$BIN" pushpull "$mib" "$reps")
    raw=$($MPI "$BIN" raw "$mib" "$reps")
    echo "  $kv"; echo "  $raw"
    lines="$lines
kvstore pushpull_${label} mxplug_gbps=$(echo "$kv" | field gbps) mpi_gbps=$(echo "$raw" | field gbps)"
done
step=$($MPI "$BIN" lenet $((REPS * 5)))
echo "  $step  (one LeNet step: 8 keys pushed and pulled)"
if [ -f "$DATA/train-images-idx3-ubyte.gz" ]; then
    # One core per worker (the issue's setting): each rank bound to its own
    # core with one engine thread; the single worker gets one core too, so
    # perfect scaling is sps = 2 x single_sps and the rest is the cost of
    # synchronisation.
    single=$(MXP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 0 "$BIN" train "$DATA" "$NET" 0 "$BATCHES" | field sps)
    two=$($MPI_CORE "$BIN" train "$DATA" "$NET" 1 "$BATCHES" | awk -F'sps=' '/^train/ { s += $2 } END { printf "%.1f", s }')
    echo "  LeNet batch 64 per worker, one core and one engine thread per worker, $BATCHES batches per worker per epoch, 2nd epoch timed"
    echo "  sync overhead: $(awk -v t="$two" -v s="$single" 'BEGIN { printf "%.1f", 100 * (1 - t / (2 * s)) }')% of the step (0% = 2 workers twice as fast as 1)"
    lines="$lines
kvstore train_lenet workers=2 sps=$two single_sps=$single"
else
    echo "  train_lenet: skipped (Fashion-MNIST not in $DATA)"
fi
echo "$lines" | sed '/^$/d'
