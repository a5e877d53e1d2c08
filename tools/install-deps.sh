#!/bin/sh
# install-deps.sh — install the Debian packages mxplug needs, only those missing.
#
# Idempotent: one dpkg-query decides; when nothing is missing it exits at once
# (this is what every `make` runs through its `deps` prerequisite, so it must
# stay cheap).  When something is missing it runs `apt-get update` once, then
# installs just the missing packages (as root, or through sudo).
#   --if-missing   accepted for clarity (the behaviour is always "if missing")
#   --list         print the package list and exit
#   --stamp FILE   after installing anything, write FILE (the Makefile
#                  includes it, so make re-reads its makefiles and their
#                  probes, e.g. `command -v mpicc`, see the new packages)
# dataset-fashion-mnist is listed because the training tests (make test)
# and the demo read it; python3-numpy/-pytest/-setuptools for the Python
# package (python/) and its tests; python3-dev (Python's headers) for its
# optional C extension _mxplug_fast (python/fast/); graphviz for `mxplug viz` pictures (its
# `dot` runs as a child process, nothing links it); libdnnl-dev for the
# oneDNN column of bench/conv only (the runtime and packs never link it).
# MXP_EXTRA_DEPS="pkg ..." adds packages.  Does not
# upgrade or remove anything.
set -eu
PKGS="gcc make pkg-config clang libclang-rt-14-dev binutils libyaml-dev libjansson-dev
libopenblas-dev libcriterion-dev zlib1g-dev
libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev
libopenmpi-dev openmpi-bin
dataset-fashion-mnist
python3 python3-numpy python3-pytest python3-setuptools python3-dev
graphviz
libdnnl-dev"
PKGS="$PKGS ${MXP_EXTRA_DEPS:-}"
STAMP=""
while [ $# -gt 0 ]; do
    case "$1" in
        --list) echo $PKGS; exit 0 ;;
        --if-missing) ;;
        --stamp) [ $# -ge 2 ] || { echo "install-deps: --stamp needs a file" >&2; exit 2; }
                 STAMP=$2; shift ;;
        *) echo "install-deps: unknown option '$1' (known: --if-missing --list --stamp FILE)" >&2; exit 2 ;;
    esac
    shift
done
# One dpkg-query for all packages; unknown packages print nothing.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' $PKGS 2>/dev/null \
            | awk '$NF == "installed" { sub(/:.*/, "", $1); print $1 }' || true)
missing=""
for p in $PKGS; do
    case " $(echo $installed) " in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "install-deps: not root and no sudo; please install:$missing" >&2
        exit 1
    fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
if [ -n "$STAMP" ]; then
    mkdir -p "$(dirname "$STAMP")"
    echo "# written by tools/install-deps.sh after installing:$missing" > "$STAMP"
fi
