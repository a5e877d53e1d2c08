"""Errors from the runtime become mx.MXNetError with its message; bad input
never crashes the interpreter."""
import numpy as np
import pytest

import mxplug as mx


def test_error_mapping_and_messages():
    assert mx.base.MXNetError is mx.MXNetError
    with pytest.raises(mx.MXNetError, match="num_filter"):
        mx.nd.Convolution(mx.nd.ones((1, 1, 4, 4)), mx.nd.ones((2, 1, 3, 3)), mx.nd.ones((2,)), kernel=(3, 3))
    with pytest.raises(mx.MXNetError, match="bogus"):
        mx.nd.relu(mx.nd.ones((2,)), bogus=1)
    with pytest.raises(mx.MXNetError, match="MXP_ESHAPE|shape"):
        mx.nd.elemwise_add(mx.nd.ones((2,)), mx.nd.ones((3,)))
    with pytest.raises(AttributeError, match="no such op"):
        mx.nd.NoSuchOperator
    with pytest.raises(mx.MXNetError):
        mx.sym.load_json("{not json")
    with pytest.raises(mx.MXNetError):
        mx.nd.array(np.zeros(2, dtype=np.complex64))
    with pytest.raises(TypeError):
        mx.nd.relu("not an array")
    with pytest.raises(mx.MXNetError):
        mx.nd.ones((2, 3)).reshape((4, 4))
    with pytest.raises(mx.MXNetError):
        mx.nd.zeros((1,) * 9)
    with pytest.raises(mx.MXNetError):
        mx.io.create_iter("NoSuchIter", batch_size=1)
    with pytest.raises(mx.MXNetError):
        mx.optimizer.create("nosuch")
    x = mx.sym.Variable("x")
    with pytest.raises(mx.MXNetError):
        (x + x).simple_bind(mx.cpu())  # shapes unknown


def test_wrong_dtype_and_handles_are_safe():
    a = mx.nd.ones((2,), dtype="int32")
    with pytest.raises(mx.MXNetError):
        mx.nd.FullyConnected(a, mx.nd.ones((3, 2)), mx.nd.ones((3,)), num_hidden=3)
    b = mx.nd.ones((2,))
    h = b.handle
    del b  # the handle is released; nothing in Python can reach it
    assert h
    with pytest.raises(mx.MXNetError):
        mx.nd.NDArray(None)


def test_gpu_context_without_a_gpu_is_a_clear_error():
    n = mx.context.num_gpus()
    assert isinstance(n, int) and n >= 0
    if n:
        pytest.skip("a GPU is present")
    with pytest.raises(mx.MXNetError, match=r"gpu\(0\)"):
        mx.nd.zeros((2, 3), ctx=mx.gpu(0))
    x = mx.sym.Variable("data")
    with pytest.raises(mx.MXNetError, match=r"gpu"):
        mx.sym.FullyConnected(x, num_hidden=4).simple_bind(mx.gpu(0), data=(2, 3))


def test_non_numeric_operands_are_type_errors():
    # numpy raises TypeError for None and strings; a float cast would have
    # made None a silent NaN (and a ** None a silent 1).
    a = mx.nd.ones(3)
    for bad in (None, "x", object()):
        for f in (lambda: a * bad, lambda: bad * a, lambda: a + bad, lambda: a - bad,
                  lambda: bad - a, lambda: a / bad, lambda: bad / a, lambda: a ** bad):
            with pytest.raises(TypeError):
                f()
    # numeric array-likes still broadcast as before
    assert np.array_equal((a * [1, 2, 3]).asnumpy(), np.array([1, 2, 3], dtype=np.float32))
    assert np.array_equal((a + np.int64(2)).asnumpy(), np.full(3, 3, dtype=np.float32))
