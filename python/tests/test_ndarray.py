"""mx.nd: creation, numpy round trips, operators with broadcasting and
scalars, slicing and assignment, views, reshape, save/load, op functions
and their docstrings, lifetime (no leak over 10,000 arrays)."""
import gc
import tracemalloc

import numpy as np
import pytest

import mxplug as mx


def test_creation_and_properties():
    a = mx.nd.array(np.arange(6, dtype=np.float64).reshape(2, 3))
    assert a.shape == (2, 3) and a.dtype == np.float64 and a.size == 6 and a.ndim == 2
    assert a.context == mx.cpu(0)
    assert mx.nd.array([1, 2]).dtype == np.float32
    np.testing.assert_array_equal(mx.nd.zeros((2, 2)).asnumpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(mx.nd.ones(3, dtype="int32").asnumpy(), np.ones(3, np.int32))
    np.testing.assert_array_equal(mx.nd.full((2,), 7.5).asnumpy(), [7.5, 7.5])
    np.testing.assert_array_equal(mx.nd.arange(1, 7, 2).asnumpy(), [1, 3, 5])
    assert mx.nd.empty((4, 5)).shape == (4, 5)
    assert mx.nd.array([[3.5]]).asscalar() == 3.5
    with pytest.raises(ValueError):
        mx.nd.ones((2,)).asscalar()


def test_operators_match_numpy():
    rng = np.random.RandomState(1)
    x = rng.uniform(1, 2, (3, 4)).astype(np.float32)
    y = rng.uniform(1, 2, (3, 4)).astype(np.float32)
    r = rng.uniform(1, 2, (1, 4)).astype(np.float32)
    a, b, c = mx.nd.array(x), mx.nd.array(y), mx.nd.array(r)
    cases = [(a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y), (a ** 2, x ** 2),
             (a + c, x + r), (a * c, x * r), (a - c, x - r), (a / c, x / r), (2 - a, 2 - x), (3 / a, 3 / x),
             (a + 1.5, x + 1.5), (-a, -x), (a > b, (x > y).astype(np.float32)), (a <= c, (x <= r).astype(np.float32)),
             (a == a, np.ones_like(x)), (a != 1.0, np.ones_like(x)), (2 ** a, 2 ** x), (abs(-a), x)]
    for got, want in cases:
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    d = a.copy()
    d += b
    d *= 2
    np.testing.assert_allclose(d.asnumpy(), (x + y) * 2, rtol=1e-6)
    np.testing.assert_allclose(a.sum().asscalar(), x.sum(), rtol=1e-5)
    np.testing.assert_allclose(mx.nd.sum(a, axis=1).asnumpy(), x.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(a.argmax(axis=1).asnumpy(), x.argmax(axis=1))


def test_slicing_views_and_setitem():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = mx.nd.array(x)
    np.testing.assert_array_equal(a[1].asnumpy(), x[1])
    np.testing.assert_array_equal(a[-1].asnumpy(), x[-1])
    np.testing.assert_array_equal(a[1:3].asnumpy(), x[1:3])
    np.testing.assert_array_equal(a[:, 2].asnumpy(), x[:, 2])
    np.testing.assert_array_equal(a[1:4:2, ::3].asnumpy(), x[1:4:2, ::3])
    np.testing.assert_array_equal(a[[0, 2]].asnumpy(), x[[0, 2]])
    v = a[1:3]  # a view: writes show in a
    v[:] = 0
    x[1:3] = 0
    np.testing.assert_array_equal(a.asnumpy(), x)
    a[0] = 5
    a[3, 1] = -1
    a[2] = np.arange(6)
    x[0] = 5
    x[3, 1] = -1
    x[2] = np.arange(6)
    np.testing.assert_array_equal(a.asnumpy(), x)
    with pytest.raises(IndexError):
        a[4]
    r = a.reshape((6, 4))
    assert r.shape == (6, 4)
    np.testing.assert_array_equal(a.reshape(-1, 3).asnumpy(), x.reshape(-1, 3))
    assert a.astype(np.int32).dtype == np.int32
    assert list(a.T.shape) == [6, 4]


def test_copyto_and_numpy_interop():
    a = mx.nd.array([[1, 2], [3, 4]])
    b = mx.nd.zeros((2, 2))
    a.copyto(b)
    np.testing.assert_array_equal(np.asarray(b), [[1, 2], [3, 4]])
    c = a.copyto(mx.cpu())
    assert c.shape == (2, 2)
    src = np.arange(4, dtype=np.float32)
    d = mx.nd.array(src)
    src[0] = 100  # copied once at creation
    assert d.asnumpy()[0] == 0


def test_save_load_roundtrip(tmp_path):
    a, b = mx.nd.array([1, 2, 3]), mx.nd.array(np.eye(2, dtype=np.float64))
    p = str(tmp_path / "x.params")
    mx.nd.save(p, {"a": a, "b": b})
    got = mx.nd.load(p)
    assert sorted(got) == ["a", "b"]
    np.testing.assert_array_equal(got["b"].asnumpy(), np.eye(2))
    mx.nd.save(p, [a])
    assert isinstance(mx.nd.load(p), list)
    with pytest.raises(mx.MXNetError):
        mx.nd.load(str(tmp_path / "missing.params"))


def test_generated_op_functions_and_docstrings():
    doc = mx.nd.Convolution.__doc__
    assert "num_filter" in doc and "kernel" in doc and "ops-nn" in doc
    assert "num_hidden" in mx.sym.FullyConnected.__doc__
    x = np.random.RandomState(0).normal(size=(2, 3, 6, 6)).astype(np.float32)
    w = np.random.RandomState(1).normal(size=(4, 3, 3, 3)).astype(np.float32)
    out = mx.nd.Convolution(data=mx.nd.array(x), weight=mx.nd.array(w), kernel=(3, 3), num_filter=4,
                            no_bias=True).asnumpy()
    want = np.zeros((2, 4, 4, 4), np.float64)
    for i in range(4):
        for j in range(4):
            want[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + 3, j:j + 3], w)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    cat = mx.nd.concat(mx.nd.ones((1, 2)), mx.nd.zeros((1, 2)), dim=0)
    np.testing.assert_array_equal(cat.asnumpy(), [[1, 1], [0, 0]])
    np.testing.assert_allclose(mx.nd.relu(mx.nd.array([-1, 2])).asnumpy(), [0, 2])
    out = mx.nd.empty((2,))
    r = mx.nd.exp(mx.nd.zeros((2,)), out=out)
    assert r is out
    np.testing.assert_array_equal(out.asnumpy(), [1, 1])


def test_ndarray_lifetime_does_not_leak():
    dev = mx._lib.Device(1, 0)

    def in_use():
        mx.nd.waitall()
        s = mx._lib.StorageStats()
        mx._lib.lib.mxp_storage_stats_get(dev, s)
        return s.bytes_in_use

    for _ in range(100):
        (mx.nd.ones((16,)) + 1).asnumpy()
    gc.collect()
    base = in_use()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(10000):
        a = mx.nd.ones((16,))
        b = a + 1
        del a, b
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    assert grown < 64 * 1024, "Python memory grew by %d bytes over 10,000 arrays" % grown
    assert in_use() <= base, "runtime storage in use grew from %d to %d bytes" % (base, in_use())


def test_repeated_calls_with_changing_parameters_and_shapes():
    # Op kwargs are converted once per distinct (op, values) in Python and
    # the runtime caches a prepared node per signature: a changed value,
    # a value of another type that compares equal (True == 1) or another
    # shape must never reuse what an earlier call prepared.
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    a = mx.nd.array(x)
    for hi in (1.0, 2.0, 1.0, 0.5):
        np.testing.assert_allclose(mx.nd.clip(a, a_min=-1.0, a_max=hi).asnumpy(), np.clip(x, -1.0, hi))
    np.testing.assert_allclose(mx.nd.sum(a, axis=1, keepdims=True).asnumpy(), x.sum(axis=1, keepdims=True),
                               atol=1e-5)
    np.testing.assert_allclose(mx.nd.sum(a, axis=1).asnumpy(), x.sum(axis=1), atol=1e-5)
    with pytest.raises(mx.MXNetError, match="cannot parse 'True'"):  # "True", not a cached "1"
        mx.nd.sum(a, axis=True)
    np.testing.assert_allclose(mx.nd.sum(a, axis=0).asnumpy(), x.sum(axis=0), atol=1e-5)
    for shape in ((3, 4), (4, 3), (3, 4), (12,)):
        y = np.arange(12, dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal((mx.nd.array(y) + mx.nd.array(y)).asnumpy(), y + y)
    b = mx.nd.array(np.ones((1, 4), np.float32))
    np.testing.assert_allclose((a + b).asnumpy(), x + 1)  # broadcast_add after elemwise_add of (3, 4)
