#!/bin/sh
# bench/gpu/run.sh — `make bench-gpu` (also part of `make bench`): mxplug on
# gpu(0) (bench_gpu.c) beside PyTorch on the same GPU (torch_gpu.py,
# cudnn.benchmark on), in one run.  Without a GPU, or without the ops-cuda
# pack, it prints one "skipped" line and succeeds.
# Env: BUILD (absolute build dir, set by make), STEPS (LeNet training steps, 200).
# Closing lines:
#   gpu train <net> mxplug_sps=<x> torch_sps=<y>
#   gpu conv <layer> <pass> mxplug_ms=<x> torch_ms=<y> impl=<name>
set -eu
BUILD=${BUILD:?set BUILD to the build directory}
STEPS=${STEPS:-200}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$BUILD/bench/gpu"
[ -x "$bin" ] || { echo "run.sh: $bin missing (make bench-gpu builds it)" >&2; exit 1; }
export MXP_MANIFEST="${MXP_MANIFEST:-$BUILD/plugins/manifest.yaml}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" "$root/examples/lenet/lenet-symbol.json" "$STEPS" | tee "$tmp/mxp.txt"
if grep -q '^bench-gpu: skipped' "$tmp/mxp.txt"; then exit 0; fi
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    python3 "$here/torch_gpu.py" "$STEPS" | tee "$tmp/torch.txt"
else
    echo "torch: skipped: PyTorch with CUDA is not available" | tee "$tmp/torch.txt"
fi
# torch value of "torch <kind> <name> [<pass>] <key>=<v>", or na.
tval() { awk -v k="$1" -v n="$2" -v p="$3" '$1 == "torch" && $2 == k && $3 == n && (p == "" || $4 == p) {
    for (i = 4; i <= NF; i++) if (index($i, "=")) { split($i, a, "="); print a[2]; exit } }' "$tmp/torch.txt"; }
echo
sps=$(awk '$1 == "mxplug" && $2 == "train" && $3 == "lenet" { split($4, a, "="); print a[2] }' "$tmp/mxp.txt")
t=$(tval train lenet ""); echo "gpu train lenet mxplug_sps=${sps:-na} torch_sps=${t:-na}"
grep '^mxplug train resnet20 skipped' "$tmp/mxp.txt" | sed 's/^mxplug train resnet20 skipped: /gpu train resnet20 skipped: /' || true
awk '$1 == "mxplug" && $2 == "conv" { split($5, i, "="); split($6, m, "="); print $3, $4, i[2], m[2] }' "$tmp/mxp.txt" |
while read -r layer pass impl ms; do
    t=$(tval conv "$layer" "$pass")
    echo "gpu conv $layer $pass mxplug_ms=$ms torch_ms=${t:-na} impl=$impl"
done
