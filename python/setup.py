"""pip install ./python — the mxplug package (pure Python over libmxplug.so
with ctypes; numpy is its only dependency).  The library is found at run
time: $MXPLUG_LIBRARY, a build tree of this checkout, or the one `make
install` put in the system (see mxplug/_lib.py)."""
from setuptools import find_packages, setup

setup(
    name="mxplug",
    version="0.1.0",
    description="MXNet 1.x's Python API over the mxplug runtime",
    packages=find_packages(include=["mxplug", "mxplug.*"]),
    python_requires=">=3.7",
    install_requires=["numpy"],
)
