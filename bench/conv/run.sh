#!/bin/sh
# bench/conv/run.sh — `make bench-conv`: Convolution, float32, 2 threads,
# mxplug (every impl, and what auto and tune choose) side by side with
# PyTorch (oneDNN on and off, its faster time taken) and with oneDNN's own
# primitives (C API, onednn/onednn_conv.c: primitive-only time in the
# layouts oneDNN prefers, and separately the reorders from/to NCHW), forward
# and forward+backward.  Rounds interleave the three (mxplug, oneDNN,
# torch, mxplug, ...) so machine-load drift hits all; each round prints
# per-case medians of REPS runs and the result is the median over ROUNDS
# rounds.  oneDNN and PyTorch run on OpenMP with 2 threads.
# Env: BUILD (absolute build dir, set by make), CONV_BENCH_ROUNDS (3),
# CONV_BENCH_REPS (5), CONV_BENCH_LAYERS (abcde).
# The last 10 lines are exactly
#   conv <a..e> <fwd|fwdbwd> mxplug_ms=<x> torch_ms=<y> impl=<chosen> onednn_ms=<z>
# with chosen = the impl `tune` picked (timing forward+backward for the
# training signature of fwdbwd) and x its time; z is oneDNN's primitive-only time
# (its reorders are in the table's dnnl-reorder column, not in z).  Tune's
# cache goes to a fresh directory, so round 1 includes tuning in its
# (untimed) warm-up.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must name the build directory}"
ROUNDS=${CONV_BENCH_ROUNDS:-3}
REPS=${CONV_BENCH_REPS:-5}
LAYERS=${CONV_BENCH_LAYERS:-abcde}
PY=/usr/bin/python3
# The PyTorch peer is Debian's python3-torch: installed here if missing.
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} python3-torch" "$here/../../tools/install-deps.sh" --if-missing
work=$(mktemp -d /tmp/mxp-bench-conv-XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
export MXP_MANIFEST="$BUILD/plugins/manifest.yaml"
unset MXP_PLUGIN_PATH MXP_PACKS MXP_IMPL_Convolution || true
export MXP_NUM_THREADS=2
export XDG_CACHE_HOME="$work/cache"
echo "bench/conv: $ROUNDS rounds x $REPS runs, layers $LAYERS, 2 threads, float32 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ "$i" -le "$ROUNDS" ]; do
    "$BUILD/bench/conv" --reps "$REPS" --layers "$LAYERS" >>"$work/mx.txt" 2>>"$work/mx.err"
    OMP_NUM_THREADS=2 "$BUILD/bench/conv-onednn" --reps "$REPS" --layers "$LAYERS" >>"$work/dnnl.txt"
    OPENBLAS_NUM_THREADS=1 "$PY" "$here/torch_conv.py" --reps "$REPS" --layers "$LAYERS" >>"$work/torch.txt"
    i=$((i + 1))
done
"$PY" - "$work/mx.txt" "$work/torch.txt" "$work/dnnl.txt" <<'PYEOF'
import statistics, sys
from collections import defaultdict
mx, impl, th, dn, dimpl = defaultdict(list), {}, defaultdict(list), defaultdict(list), {}
for line in open(sys.argv[1]):
    _, layer, p, var, run, ms = line.split()
    if ms != "-":
        mx[(layer, p, var)].append(float(ms))
        impl[(layer, p, var)] = run
for line in open(sys.argv[2]):
    _, layer, p, path, ms = line.split()
    th[(layer, p, path)].append(float(ms))
for line in open(sys.argv[3]):
    _, layer, p, prim, reo, impls, layouts = line.split()
    dn[(layer, p, "prim")].append(float(prim))
    dn[(layer, p, "reorder")].append(float(reo))
    dimpl[(layer, p)] = "%s %s" % (impls, layouts)
med = lambda v: statistics.median(v) if v else float("nan")
layers = sorted({k[0] for k in mx} | {k[0] for k in th})
cols = ["gemm", "direct", "winograd", "pointwise", "strip", "auto", "tune", "torch-onednn", "torch-native", "onednn", "dnnl-reorder"]
print("median ms          " + "".join("%14s" % c for c in cols))
final = []
for layer in layers:
    for p in ("fwd", "fwdbwd"):
        row = []
        for v in cols[:7]:
            k = (layer, p, v)
            if k not in mx:
                row.append("%14s" % "-")
            elif v in ("auto", "tune"):
                row.append("%14s" % ("%.2f(%s)" % (med(mx[k]), impl[k][:4])))
            else:
                row.append("%14.2f" % med(mx[k]))
        t1, t2 = med(th[(layer, p, "onednn")]), med(th[(layer, p, "native")])
        d1, d2 = med(dn[(layer, p, "prim")]), med(dn[(layer, p, "reorder")])
        row += ["%14.2f" % t1, "%14.2f" % t2, "%14.2f" % d1, "%14.2f" % d2]
        print("%-6s %-11s" % (layer, p) + "".join(row))
        k = (layer, p, "tune")
        final.append("conv %s %s mxplug_ms=%.3f torch_ms=%.3f impl=%s onednn_ms=%.3f" % (
            layer, p, med(mx.get(k, [])), min(t1, t2), impl.get(k, "-"), d1))
print("per round, ms (mxplug tune's choice / oneDNN primitive):")
for layer in layers:
    for p in ("fwd", "fwdbwd"):
        a, b = mx.get((layer, p, "tune"), []), dn.get((layer, p, "prim"), [])
        print("  %-6s %-7s %s / %s" % (layer, p, " ".join("%.2f" % v for v in a), " ".join("%.2f" % v for v in b)))
print("oneDNN primitives (impl, forward src/weights layouts):")
for k in sorted(dimpl):
    print("  %-6s %-7s %s" % (k[0], k[1], dimpl[k]))
print("load average at the end: " + " ".join(open("/proc/loadavg").read().split()[:3]))
print("\n".join(final))
PYEOF
