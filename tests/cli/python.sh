#!/bin/sh
# python.sh — the Python package's tests (python/tests, pytest) against this
# build: MXPLUG_LIBRARY is the build's libmxplug.so, MXP_MANIFEST its
# manifest.  Run by tools/run-tests.sh in plain builds only (sanitizer
# builds would need the sanitizer runtime LD_PRELOADed into Python, so
# there the runner skips tests/cli/).  Needs Debian's python3-numpy and
# python3-pytest (tools/install-deps.sh).
. "$(dirname "$0")/lib/common.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || fail "no $PY (Debian's python3)"
"$PY" -c 'import numpy, pytest' 2>"$TMP/err" || fail "python3-numpy and python3-pytest are needed (tools/install-deps.sh)"
export MXPLUG_BUILD="$BUILD" MXPLUG_LIBRARY="$BUILD/lib/libmxplug.so" MXP_MANIFEST="$BUILD/plugins/manifest.yaml"
cd "$ROOT/python"
# -p no:cacheprovider: write nothing into the source tree.
"$PY" -m pytest -q -p no:cacheprovider tests || fail "python tests (see above)"
echo "python: ok"
