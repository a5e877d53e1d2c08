#!/bin/sh
# bench/engine/run.sh — mxplug engine vs OpenMP `task depend` (libgomp), 2
# threads, three workloads (see bench.c).  Runs are interleaved (mxplug, omp,
# mxplug, omp, ...) and the median of RUNS (default 5) is reported; each
# engine run is its own process, as is each OpenMP run.
# mxplug's figure uses pre-created operators (mxp_engine_new_op + push_op,
# the no-allocation path); plain mxp_engine_push is measured too and shown
# on the detail lines.
# Every run is bounded by RUN_TIMEOUT seconds (default 120): the OpenMP
# peer's fanout once spun for over 10 minutes on a quiet machine where it
# usually takes ~7 s; a run past the bound is killed and listed as
# `timed out`, and the medians are taken over the runs that finished
# (`timed out` when none did).
# Env: BUILD (absolute build dir, set by `make bench-engine`), RUNS, N (ops
# per run, default 1000000), THREADS (default 2), RUN_TIMEOUT.
# Last lines, one per workload:
#   engine <workload> mxplug_us_per_op=<x> openmp_us_per_op=<y>
set -eu
BUILD=${BUILD:?set BUILD to the build directory}
RUNS=${RUNS:-5}
N=${N:-1000000}
THREADS=${THREADS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
here=$(cd "$(dirname "$0")" && pwd)
bin="$BUILD/bench/engine"
peer="$BUILD/bench/engine_omp_peer"
[ -x "$bin" ] || { echo "run.sh: $bin missing (make bench-engine builds it)" >&2; exit 1; }
if [ ! -x "$peer" ] || [ "$here/peer/omp_peer.c" -nt "$peer" ]; then
    ${CC:-gcc} -O2 -std=c11 -D_GNU_SOURCE -fopenmp -o "$peer" "$here/peer/omp_peer.c"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Median of the numeric lines of a file ("timed out" lines skipped).
median() { grep -v '^timed' "$1" | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "timed out"; else if (NR%2) print a[(NR+1)/2]; else printf "%.4f\n", (a[NR/2]+a[NR/2+1])/2}'; }
# One bounded run: appends its us/op, or "timed out", to file $1.
run1() {
    out=$1; shift
    if r=$(timeout -k 5 "$RUN_TIMEOUT" "$@"); then echo "$r" | awk '{print $3}' >> "$out"
    else rc=$?; if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "timed out" >> "$out"
         else echo "run.sh: $* failed (status $rc)" >&2; exit 1; fi; fi
}

for w in chain independent fanout; do
    i=0
    while [ "$i" -lt "$RUNS" ]; do
        run1 "$tmp/$w.op" env MXP_NUM_THREADS="$THREADS" "$bin" "$w" op "$N"
        run1 "$tmp/$w.omp" env OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=passive OMP_PROC_BIND=false "$peer" "$w" "$N"
        run1 "$tmp/$w.push" env MXP_NUM_THREADS="$THREADS" "$bin" "$w" push "$N"
        i=$((i + 1))
    done
    printf '%-12s runs=%s  mxplug(op) %s  mxplug(push) %s  openmp %s   [us/op, all runs]\n' "$w" "$RUNS" \
        "$(tr '\n' ',' < "$tmp/$w.op")" "$(tr '\n' ',' < "$tmp/$w.push")" "$(tr '\n' ',' < "$tmp/$w.omp")"
    printf '%-12s median: mxplug(op) %s  mxplug(push) %s  openmp %s\n' "$w" \
        "$(median "$tmp/$w.op")" "$(median "$tmp/$w.push")" "$(median "$tmp/$w.omp")"
done
for w in chain independent fanout; do
    echo "engine $w mxplug_us_per_op=$(median "$tmp/$w.op") openmp_us_per_op=$(median "$tmp/$w.omp")"
done
