#!/bin/sh
# bench/conv/run.sh — `make bench-conv`: Convolution, float32, 2 threads,
# mxplug (every impl, and what auto and tune choose) side by side with
# PyTorch (oneDNN on and off, its faster time taken), forward and
# forward+backward.  Rounds interleave the two (mxplug, torch, mxplug,
# torch, ...) so machine-load drift hits both; each round prints per-case
# medians of REPS runs and the result is the median over ROUNDS rounds.
# Env: BUILD (absolute build dir, set by make), CONV_BENCH_ROUNDS (3),
# CONV_BENCH_REPS (5), CONV_BENCH_LAYERS (abcde).
# The last 10 lines are exactly
#   conv <a..e> <fwd|fwdbwd> mxplug_ms=<x> torch_ms=<y> impl=<chosen>
# with chosen = the impl `tune` picked (on forward timings of the training
# signature for fwdbwd) and x its time.  Tune's cache goes to a fresh
# directory, so round 1 includes tuning in its (untimed) warm-up.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must name the build directory}"
ROUNDS=${CONV_BENCH_ROUNDS:-3}
REPS=${CONV_BENCH_REPS:-5}
LAYERS=${CONV_BENCH_LAYERS:-abcde}
PY=/usr/bin/python3
work=$(mktemp -d /tmp/mxp-bench-conv-XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
export MXP_MANIFEST="$BUILD/plugins/manifest.yaml"
unset MXP_PLUGIN_PATH MXP_PACKS MXP_IMPL_Convolution || true
export MXP_NUM_THREADS=2
export XDG_CACHE_HOME="$work/cache"
echo "bench/conv: $ROUNDS rounds x $REPS runs, layers $LAYERS, 2 threads, float32 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
i=1
while [ "$i" -le "$ROUNDS" ]; do
    "$BUILD/bench/conv" --reps "$REPS" --layers "$LAYERS" >>"$work/mx.txt" 2>>"$work/mx.err"
    OPENBLAS_NUM_THREADS=1 "$PY" "$here/torch_conv.py" --reps "$REPS" --layers "$LAYERS" >>"$work/torch.txt"
    i=$((i + 1))
done
"$PY" - "$work/mx.txt" "$work/torch.txt" <<'PYEOF'
import statistics, sys
from collections import defaultdict
mx, impl, th = defaultdict(list), {}, defaultdict(list)
for line in open(sys.argv[1]):
    _, layer, p, var, run, ms = line.split()
    if ms != "-":
        mx[(layer, p, var)].append(float(ms))
        impl[(layer, p, var)] = run
for line in open(sys.argv[2]):
    _, layer, p, path, ms = line.split()
    th[(layer, p, path)].append(float(ms))
med = lambda v: statistics.median(v) if v else float("nan")
layers = sorted({k[0] for k in mx} | {k[0] for k in th})
cols = ["gemm", "direct", "winograd", "auto", "tune", "torch-onednn", "torch-native"]
print("median ms          " + "".join("%14s" % c for c in cols))
final = []
for layer in layers:
    for p in ("fwd", "fwdbwd"):
        row = []
        for v in cols[:5]:
            k = (layer, p, v)
            if k not in mx:
                row.append("%14s" % "-")
            elif v in ("auto", "tune"):
                row.append("%14s" % ("%.2f(%s)" % (med(mx[k]), impl[k][:4])))
            else:
                row.append("%14.2f" % med(mx[k]))
        t1, t2 = med(th[(layer, p, "onednn")]), med(th[(layer, p, "native")])
        row += ["%14.2f" % t1, "%14.2f" % t2]
        print("%-6s %-11s" % (layer, p) + "".join(row))
        k = (layer, p, "tune")
        final.append("conv %s %s mxplug_ms=%.3f torch_ms=%.3f impl=%s" % (
            layer, p, med(mx.get(k, [])), min(t1, t2), impl.get(k, "-")))
print("\n".join(final))
PYEOF
