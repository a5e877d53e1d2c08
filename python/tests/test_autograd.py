"""mx.autograd: the runtime's tape from Python.  LeNet's gradients recorded
imperatively are bit-identical to the executor's (same ops, same kernels,
same backward program); finite differences; modes; errors."""
import numpy as np
import pytest

import mxplug as mx
from mxplug import autograd as ag


def lenet_sym():
    d = mx.sym.Variable("data")
    h = mx.sym.Convolution(d, kernel=(5, 5), num_filter=6, name="c1")
    h = mx.sym.Activation(h, act_type="tanh", name="a1")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="p1")
    h = mx.sym.Convolution(h, kernel=(5, 5), num_filter=16, name="c2")
    h = mx.sym.Activation(h, act_type="tanh", name="a2")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="p2")
    h = mx.sym.Flatten(h, name="f")
    h = mx.sym.FullyConnected(h, num_hidden=120, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="a3")
    h = mx.sym.FullyConnected(h, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def lenet_nd(p, x, label):
    h = mx.nd.Convolution(x, p["c1_weight"], p["c1_bias"], kernel=(5, 5), num_filter=6)
    h = mx.nd.Activation(h, act_type="tanh")
    h = mx.nd.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = mx.nd.Convolution(h, p["c2_weight"], p["c2_bias"], kernel=(5, 5), num_filter=16)
    h = mx.nd.Activation(h, act_type="tanh")
    h = mx.nd.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = mx.nd.Flatten(h)
    h = mx.nd.FullyConnected(h, p["fc1_weight"], p["fc1_bias"], num_hidden=120)
    h = mx.nd.Activation(h, act_type="tanh")
    h = mx.nd.FullyConnected(h, p["fc2_weight"], p["fc2_bias"], num_hidden=10)
    return mx.nd.SoftmaxOutput(h, label)


def test_lenet_imperative_equals_executor_bitwise():
    rng = np.random.RandomState(0)
    ex = lenet_sym().simple_bind(mx.cpu(), data=(8, 1, 28, 28))
    vals = {}
    for n, a in ex.arg_dict.items():
        v = rng.randint(0, 10, a.shape) if n == "softmax_label" else rng.normal(0, 0.1, a.shape)
        a[:] = v
        vals[n] = v
    ex.forward(is_train=True)
    ex.backward()
    p = {n: mx.nd.array(v.astype(np.float32)) for n, v in vals.items()}
    for n, a in p.items():
        if n not in ("data", "softmax_label"):
            a.attach_grad()
    with ag.record():
        out = lenet_nd(p, p["data"], p["softmax_label"])
    out.backward()
    assert np.array_equal(out.asnumpy(), ex.outputs[0].asnumpy())
    for n, g in ex.grad_dict.items():
        if n in p and p[n].grad is not None:
            assert np.array_equal(g.asnumpy(), p[n].grad.asnumpy()), n


def test_finite_differences_float64():
    x0 = np.array([[0.3, -1.2], [2.0, 0.7]])
    x = mx.nd.array(x0)
    x.attach_grad()
    with ag.record():
        y = mx.nd.sum(mx.nd.tanh(x) * x + x ** 3)
    y.backward()

    def f(v):
        return np.sum(np.tanh(v) * v + v ** 3)
    num = np.zeros_like(x0)
    for i in np.ndindex(*x0.shape):
        e = np.zeros_like(x0)
        e[i] = 1e-6
        num[i] = (f(x0 + e) - f(x0 - e)) / 2e-6
    np.testing.assert_allclose(x.grad.asnumpy(), num, rtol=1e-6)


def test_modes_head_grads_grad_req_add_retain_graph():
    assert not ag.is_recording() and not ag.is_training()
    x = mx.nd.array([1.0, 2.0, 3.0])
    x.attach_grad(grad_req="add")
    with ag.record():
        assert ag.is_recording() and ag.is_training()
        y = x * 2
        with ag.pause():
            assert not ag.is_recording()
            z = x * 5  # not recorded
    assert not ag.is_recording()
    with ag.record(train_mode=False):
        assert not ag.is_training()
    with ag.train_mode():
        assert ag.is_training()
    with ag.predict_mode():
        assert not ag.is_training()
    y2 = None
    with ag.record():
        y2 = x * 2
    y2.backward(mx.nd.array([1.0, 10.0, 100.0]), retain_graph=True)
    y2.backward(mx.nd.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(x.grad.asnumpy(), [4, 40, 400])
    with pytest.raises(mx.MXNetError, match="tape is empty"):
        y2.backward()
    with pytest.raises(mx.MXNetError):
        z.backward()
    del y


def test_dropout_trains_only_in_train_mode():
    x = mx.nd.ones((1000,))
    x.attach_grad()
    with ag.record():
        y = mx.nd.Dropout(x, p=0.5)
    kept = y.asnumpy()
    assert 300 < (kept == 0).sum() < 700 and set(np.unique(kept)) <= {0.0, 2.0}
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), kept)  # d(mask * 2x)/dx
    with ag.record(train_mode=False):
        y = mx.nd.Dropout(x, p=0.5)
    np.testing.assert_array_equal(y.asnumpy(), np.ones(1000))


def test_inplace_after_record_is_refused():
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    with ag.record():
        y = x * x
    x[:] = 3
    with pytest.raises(mx.MXNetError, match="overwritten"):
        y.backward()
    g = ag.grad
    w = mx.nd.array([2.0, 5.0])
    w.attach_grad()
    with ag.record():
        z = mx.nd.sum(w * w)
    (gw,) = g(z, [w])
    np.testing.assert_array_equal(gw.asnumpy(), [4, 10])


def test_reshape_slicing_and_l2loss_are_recorded():
    x0 = np.arange(6.0).reshape(2, 3)
    x = mx.nd.array(x0)
    x.attach_grad()
    with ag.record():
        y = (x.reshape((3, 2)) * 2)[1:3]
        z = mx.nd.sum(y * y)
    z.backward()
    want = (8 * x0.reshape(3, 2)) * np.array([[0], [1], [1]])
    np.testing.assert_allclose(x.grad.asnumpy(), want.reshape(2, 3))
    p0 = np.array([[1.0, 2.0], [0.5, -1.0]])
    t0 = np.array([[0.0, 1.0], [1.0, 1.0]])
    p = mx.nd.array(p0)
    p.attach_grad()
    with ag.record():
        loss = mx.gluon.loss.L2Loss()(p, mx.nd.array(t0))
    loss.backward()
    np.testing.assert_allclose(p.grad.asnumpy(), (p0 - t0) / 2, rtol=1e-6)  # d/dp 0.5 * mean((p - t)^2)
