"""The two paths of NDArray's operators: the optional C extension
_mxplug_fast (python/fast/mxplug_fast.c, built by make where python3-dev is
installed) and the pure ctypes path (MXPLUG_NO_FAST=1, or no extension).
The same checks run in this process (the C path when the build has it) and
in a child process with MXPLUG_NO_FAST=1 (the ctypes path); results are
compared with numpy, errors with MXNetError, lifetimes with the runtime's
storage statistics and reference counts."""
import glob
import importlib.machinery
import os
import subprocess
import sys

import numpy as np
import pytest

import mxplug as mx
from mxplug import autograd

HERE = os.path.dirname(os.path.abspath(__file__))


def _ext_built():
    libdir = os.path.dirname(os.path.abspath(mx._lib.path))
    return any(glob.glob(os.path.join(libdir, "_mxplug_fast" + s)) for s in importlib.machinery.EXTENSION_SUFFIXES)


def _in_use():
    s = mx._lib.StorageStats()
    mx._lib.lib.mxp_storage_stats_get(mx._lib.Device(1, 0), s)
    return s.bytes_in_use


def check_values():
    x = np.array([1.5, -2.0, 3.25], np.float32)
    y = np.array([[0.5], [4.0]], np.float32)
    a, b, c = mx.nd.array(x), mx.nd.array(y), mx.nd.array(x * 2 + 1)
    xc = x * 2 + 1
    for got, want in [(a + c, x + xc), (a - c, x - xc), (a * c, x * xc), (a / c, x / xc),  # same shapes
                      (a + b, x + y), (a - b, x - y), (b * a, y * x), (b / a, y / x),  # broadcast
                      (a + 2, x + 2), (2 + a, 2 + x), (a - 2, x - 2), (2 - a, 2 - x),  # scalars
                      (a * 3, x * 3), (3 * a, 3 * x), (a / 4, x / 4), (4 / a, 4 / x),
                      (a + True, x + 1), (a * np.float32(2), x * 2), (a + x, x + x), (a - [1, 1, 1], x - 1)]:
        assert isinstance(got, mx.nd.NDArray)
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
        assert got.shape == want.shape
    # elementwise results know their shape; broadcast results ask C
    assert (a + c)._shape == (3,) and (a + b).shape == (2, 3)
    # a chain, and in-place operators (Python methods on both paths)
    d = a + c
    d += a
    np.testing.assert_allclose(((a + c) * (a - c) / c).asnumpy(), (x + xc) * (x - xc) / xc, rtol=1e-6)
    np.testing.assert_allclose(d.asnumpy(), x + xc + x, rtol=1e-6)


def check_errors():
    a = mx.nd.ones((3,))
    with pytest.raises(mx.MXNetError, match="broadcast"):
        a + mx.nd.ones((2,))
    with pytest.raises(mx.MXNetError, match="broadcast"):
        a * mx.nd.ones((4, 2))
    dead = mx.nd.ones((3,))
    dead.__del__()  # released: _h is None now, the op must refuse it
    assert dead._h is None
    with pytest.raises(mx.MXNetError, match="NULL"):
        a + dead
    with pytest.raises(mx.MXNetError):
        dead - a
    dead.__del__()  # twice: nothing left to release
    with pytest.raises(AttributeError):  # an NDArray without a handle (never initialised)
        a + object.__new__(mx.nd.NDArray)
    with pytest.raises(TypeError):
        a + "text"


def check_autograd():
    x = mx.nd.array([1.0, 2.0, 3.0])
    y = mx.nd.array([4.0, 5.0, 6.0])
    x.attach_grad()
    y.attach_grad()
    with autograd.record():
        z = (x + y) * x - y / x
    z.backward()
    xs, ys = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * xs + ys + ys / xs ** 2, rtol=1e-5)
    np.testing.assert_allclose(y.grad.asnumpy(), xs - 1 / xs, rtol=1e-5)
    del x, y, z  # marked variables: __del__ unmarks before releasing
    mx.nd.waitall()


def check_lifetime():
    a, b = mx.nd.ones((16,)), mx.nd.ones((16,))
    for _ in range(100):
        c = a + b
    del c
    mx.nd.waitall()
    base = _in_use()
    h = a._h
    for _ in range(10000):
        c = a * b
        c = c - a
    del c
    mx.nd.waitall()
    assert _in_use() <= base, "storage in use grew from %d to %d bytes" % (base, _in_use())
    assert a._h == h and (a + b).asnumpy().tolist() == [2.0] * 16
    # a finalizer running while an exception is handled leaves it alone
    try:
        raise ValueError("pending")
    except ValueError:
        t = a + b
        del t
        assert sys.exc_info()[0] is ValueError


def run_all(expect_fast):
    assert mx.nd.FAST == expect_fast, "FAST is %s, expected %s" % (mx.nd.FAST, expect_fast)
    if expect_fast:  # the C methods are installed on the class
        assert type(mx.nd.NDArray.__dict__["__add__"]).__name__ == "method_descriptor"
        assert type(mx.nd.NDArray.__dict__["__del__"]).__name__ == "method_descriptor"
    else:
        assert mx.nd.NDArray.__dict__["__add__"] is mx.nd._PY_METHODS["__add__"]
    check_values()
    check_errors()
    check_autograd()
    check_lifetime()


def test_c_path_in_this_process():
    if not _ext_built():
        pytest.skip("no _mxplug_fast next to %s (python3-dev missing at build time)" % mx._lib.path)
    if os.environ.get("MXPLUG_NO_FAST", "") not in ("", "0"):
        pytest.skip("MXPLUG_NO_FAST is set")
    run_all(True)


def test_ctypes_path_in_a_child():
    env = dict(os.environ, MXPLUG_NO_FAST="1")
    code = "import sys; sys.path[:0] = [%r, %r]; import test_fastpath as t; t.run_all(False); print('ok')" % (
        HERE, os.path.dirname(HERE))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_bad_install_arguments_are_refused():
    if not mx.nd.FAST:
        pytest.skip("the C path is not installed here")
    with pytest.raises(RuntimeError, match="already installed"):
        mx.nd._fast.install(mx.nd.NDArray, 1, 1, 0, mx.base.check, mx.nd._PY_METHODS)
    with pytest.raises(ValueError, match="NULL"):
        mx.nd._fast.install(mx.nd.NDArray, 0, 0, 0, mx.base.check, mx.nd._PY_METHODS)
