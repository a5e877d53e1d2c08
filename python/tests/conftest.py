"""pytest setup for the mxplug package tests: import the package from this
checkout (python/), use the build named by $MXPLUG_BUILD (tests/cli/python.sh
sets it, with MXPLUG_LIBRARY and MXP_MANIFEST), else the newest build*/ tree."""
import glob
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))


def _build_dir():
    b = os.environ.get("MXPLUG_BUILD")
    if b:
        return b
    cands = [d for d in glob.glob(os.path.join(ROOT, "build*")) if os.path.isfile(os.path.join(d, "lib", "libmxplug.so"))
             and "san" not in os.path.basename(d)]
    if not cands:
        raise RuntimeError("no build tree with lib/libmxplug.so under %s; run make" % ROOT)
    return max(cands, key=lambda d: os.path.getmtime(os.path.join(d, "lib", "libmxplug.so")))


BUILD = _build_dir()
os.environ.setdefault("MXPLUG_LIBRARY", os.path.join(BUILD, "lib", "libmxplug.so"))
os.environ.setdefault("MXP_MANIFEST", os.path.join(BUILD, "plugins", "manifest.yaml"))

FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.fixture
def build_dir():
    return BUILD


def have_fashion():
    return os.path.isfile(os.path.join(FASHION, "train-images-idx3-ubyte.gz"))
