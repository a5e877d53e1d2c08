#!/bin/sh
# bench/engine/run.sh — mxplug engine vs OpenMP `task depend` (libgomp), 2
# threads, three workloads (see bench.c).  Runs are interleaved (mxplug, omp,
# mxplug, omp, ...) and the median of RUNS (default 5) is reported; each
# engine run is its own process, as is each OpenMP run.
# mxplug's figure uses pre-created operators (mxp_engine_new_op + push_op,
# the no-allocation path); plain mxp_engine_push is measured too and shown
# on the detail lines.
# Env: BUILD (absolute build dir, set by `make bench-engine`), RUNS, N (ops
# per run, default 1000000), THREADS (default 2).
# Last lines, one per workload:
#   engine <workload> mxplug_us_per_op=<x> openmp_us_per_op=<y>
set -eu
BUILD=${BUILD:?set BUILD to the build directory}
RUNS=${RUNS:-5}
N=${N:-1000000}
THREADS=${THREADS:-2}
here=$(cd "$(dirname "$0")" && pwd)
bin="$BUILD/bench/engine"
peer="$BUILD/bench/engine_omp_peer"
[ -x "$bin" ] || { echo "run.sh: $bin missing (make bench-engine builds it)" >&2; exit 1; }
if [ ! -x "$peer" ] || [ "$here/peer/omp_peer.c" -nt "$peer" ]; then
    ${CC:-gcc} -O2 -std=c11 -D_GNU_SOURCE -fopenmp -o "$peer" "$here/peer/omp_peer.c"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else printf "%.4f\n", (a[NR/2]+a[NR/2+1])/2}'; }

for w in chain independent fanout; do
    i=0
    while [ "$i" -lt "$RUNS" ]; do
        MXP_NUM_THREADS=$THREADS "$bin" "$w" op "$N" | awk '{print $3}' >> "$tmp/$w.op"
        OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive OMP_PROC_BIND=false "$peer" "$w" "$N" | awk '{print $3}' >> "$tmp/$w.omp"
        MXP_NUM_THREADS=$THREADS "$bin" "$w" push "$N" | awk '{print $3}' >> "$tmp/$w.push"
        i=$((i + 1))
    done
    printf '%-12s runs=%s  mxplug(op) %s  mxplug(push) %s  openmp %s   [us/op, all runs]\n' "$w" "$RUNS" \
        "$(tr '\n' ' ' < "$tmp/$w.op")" "$(tr '\n' ' ' < "$tmp/$w.push")" "$(tr '\n' ' ' < "$tmp/$w.omp")"
    printf '%-12s median: mxplug(op) %s  mxplug(push) %s  openmp %s\n' "$w" \
        "$(median "$tmp/$w.op")" "$(median "$tmp/$w.push")" "$(median "$tmp/$w.omp")"
done
for w in chain independent fanout; do
    echo "engine $w mxplug_us_per_op=$(median "$tmp/$w.op") openmp_us_per_op=$(median "$tmp/$w.omp")"
done
