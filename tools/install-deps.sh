#!/bin/sh
# install-deps.sh — install the Debian packages mxplug needs, only those missing.
# Idempotent.  --if-missing: exit at once (quietly) when nothing is missing.
# Runs apt-get update once, and only when something has to be installed.
set -eu
PKGS="gcc make pkg-config clang libclang-rt-14-dev libyaml-dev libjansson-dev
libopenblas-dev libcriterion-dev zlib1g-dev"
[ "${MXP_EXTRA_DEPS:-}" ] && PKGS="$PKGS $MXP_EXTRA_DEPS"
missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in *"ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
