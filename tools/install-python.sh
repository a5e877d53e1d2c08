#!/bin/sh
# install-python.sh DESTDIR PYTHONDIR LIBDIR [FAST] — `make install`'s Python
# step: copy python/mxplug (and FAST, the optional C extension
# _mxplug_fast*.so when make built it) into DESTDIR/PYTHONDIR and record LIBDIR (where
# libmxplug.so is installed) in mxplug/_installed.py, so the installed
# package finds the installed library without LD_LIBRARY_PATH.  Byte code
# is not compiled (Python does it on first import).  An empty PYTHONDIR
# (no /usr/bin/python3) skips the step with a note.
set -eu
destdir=$1 pydir=$2 libdir=$3 fast=${4:-}
if [ -z "$pydir" ]; then
    echo "install-python: no /usr/bin/python3; the Python package (python/) is not installed" >&2
    exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
dst="$destdir$pydir/mxplug"
rm -rf "$dst"
mkdir -p "$dst"
(cd "$root/python/mxplug" && find . -name '*.py' | while read -r f; do
    mkdir -p "$dst/$(dirname "$f")"
    install -m 644 "$f" "$dst/$f"
done)
[ -z "$fast" ] || install -m 755 "$fast" "$dst/"
printf '"""Written by make install: where libmxplug.so was installed."""\nLIBDIR = %s\n' \
    "$(/usr/bin/python3 -c 'import sys; print(repr(sys.argv[1]))' "$libdir")" > "$dst/_installed.py"
echo "install-python: mxplug -> $dst"
