#!/bin/sh
# demo.sh BUILD — what `make demo` runs after building.
# Today: installs the demo's extra Debian data (dataset-fashion-mnist, via
# tools/install-deps.sh with MXP_EXTRA_DEPS, only if missing) and lists what
# the runtime finds in the build tree's manifest (`mxplug list`).  Planned:
# train a small network on Fashion-MNIST with `mxplug train` once the
# operator packs, the executor and the MNIST iterator exist.
set -eu
build=${1:-$(pwd)/build}
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} dataset-fashion-mnist" tools/install-deps.sh --if-missing
export MXP_MANIFEST="${MXP_MANIFEST:-$build/plugins/manifest.yaml}"
if [ -x "$build/bin/mxplug" ]; then
    echo "demo: $build/bin/mxplug list"
    "$build/bin/mxplug" list
else
    echo "demo: built $build/lib/libmxplug.so; the mxplug CLI (tools/mxplug/) is not there yet."
    echo "demo: manifest: $MXP_MANIFEST"
fi
