#!/bin/sh
# bench/python/run.sh — `make bench-python`: the C floor of one invoke
# (invoke_overhead), then bench.py (Python op overhead and Gluon LeNet
# training, imperative and hybridized, against PyTorch eager; see its
# header).  The last three lines are bench.py's closing lines.
# PyTorch runs with OMP_WAIT_POLICY=passive unless the environment sets it
# (as bench/train: on a shared, loaded machine libgomp's spinning threads
# made PyTorch's LeNet step several times slower).
# mxplug runs with MXP_IMPL_Convolution=tune (unless the environment sets
# it), as bench/train and the CLI numbers it is compared with: each
# convolution layer gets the implementation timed fastest on its own
# shapes, the tune cache starting empty in a scratch directory (tuning is
# in the warm-up steps).
# Env: BUILD (absolute build dir, set by make); BENCH_PY_* (bench.py).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must name the build directory}"
export MXP_MANIFEST="$BUILD/plugins/manifest.yaml" MXPLUG_LIBRARY="$BUILD/lib/libmxplug.so"
unset MXP_PLUGIN_PATH MXP_PACKS || true
export MXP_NUM_THREADS="${MXP_NUM_THREADS:-2}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
export MXP_IMPL_Convolution="${MXP_IMPL_Convolution:-tune}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
"$BUILD/bench/python" 100000
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} python3-torch" "$here/../../tools/install-deps.sh" --if-missing
/usr/bin/python3 "$here/bench.py"
