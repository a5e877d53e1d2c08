"""mx.sym and mx.executor: composition, naming, groups, inference, JSON,
bind / simple_bind, forward and backward against numpy."""
import json

import numpy as np
import pytest

import mxplug as mx


def mlp():
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(data=act, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def test_listing_and_inference():
    net = mlp()
    assert net.list_arguments() == ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "softmax_label"]
    assert net.list_outputs() == ["softmax_output"]
    assert net.list_auxiliary_states() == []
    args, outs, aux = net.infer_shape(data=(5, 4))
    assert args == [(5, 4), (8, 4), (8,), (3, 8), (3,), (5,)] and outs == [(5, 3)]
    assert net.infer_shape() == (None, None, None)
    types = net.infer_type(data=np.float32)
    assert types[1] == [np.float32]
    bn = mx.sym.BatchNorm(mx.sym.Variable("x"), name="bn")
    assert bn.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    internals = net.get_internals()
    assert "fc1_output" in internals.list_outputs()
    assert internals["fc1_output"].list_outputs() == ["fc1_output"]
    g = mx.sym.Group([net, internals["fc1_output"]])
    assert g.list_outputs() == ["softmax_output", "fc1_output"] and len(g) == 2


def test_json_roundtrip(tmp_path):
    net = mlp()
    js = net.tojson()
    assert json.loads(js)["nodes"][1]["name"] == "fc1_weight"
    again = mx.sym.load_json(js)
    assert again.list_arguments() == net.list_arguments()
    p = str(tmp_path / "net.json")
    net.save(p)
    assert mx.sym.load(p).tojson() == js


def test_arithmetic_and_compose():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    c = (a + b) * 2 - a / 4
    ex = c.bind(mx.cpu(), {"a": mx.nd.array([1, 2]), "b": mx.nd.array([3, 4])})
    np.testing.assert_allclose(ex.forward()[0].asnumpy(), (np.array([1, 2]) + [3, 4]) * 2 - np.array([1, 2]) / 4)
    x = mx.sym.Variable("x")
    f = mx.sym.relu(x)
    composed = f(x=a * 3)
    assert composed.list_arguments() == ["a"]


def test_executor_forward_backward_against_numpy():
    net = mlp()
    ex = net.simple_bind(mx.cpu(), data=(4, 5))
    rng = np.random.RandomState(0)
    vals = {}
    for name, arr in ex.arg_dict.items():
        v = rng.randint(0, 3, arr.shape) if name == "softmax_label" else rng.normal(0, 0.5, arr.shape)
        arr[:] = v
        vals[name] = v.astype(np.float32)
    out = ex.forward(is_train=True)[0].asnumpy()
    h = np.maximum(vals["data"] @ vals["fc1_weight"].T + vals["fc1_bias"], 0)
    z = h @ vals["fc2_weight"].T + vals["fc2_bias"]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(out, p, rtol=1e-5, atol=1e-6)
    ex.backward()
    onehot = np.eye(3)[vals["softmax_label"].astype(int)]
    dz = p - onehot
    np.testing.assert_allclose(ex.grad_dict["fc2_bias"].asnumpy(), dz.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ex.grad_dict["fc2_weight"].asnumpy(), dz.T @ h, rtol=1e-4, atol=1e-5)
    assert "data" in ex.grad_dict
    ex2 = net.simple_bind(mx.cpu(), grad_req="null", data=(4, 5))
    assert ex2.grad_dict == {}
    ex.reshape(data=(2, 5), softmax_label=(2,))
    assert ex.outputs[0].shape == (2, 3)


def test_bind_errors():
    net = mlp()
    with pytest.raises(mx.MXNetError):
        net.bind(mx.cpu(), args={"data": mx.nd.ones((2, 5))})


def test_simple_bind_type_dict():
    # MXNet's type_dict: the arrays get the dtypes (it was ignored: float32)
    x = mx.sym.Variable("data")
    y = mx.sym.FullyConnected(x, num_hidden=2, name="fc")
    ex = y.simple_bind(mx.cpu(), data=(1, 3), type_dict={"data": "float64"})
    assert ex.arg_dict["data"].dtype == np.float64
    assert ex.arg_dict["fc_weight"].dtype == np.float64
    assert ex.grad_dict["fc_weight"].dtype == np.float64
    xv = np.array([[1 + 1e-12, 2.0, 3.0]])
    w = np.array([[1.0, 0.0, 0.0], [0.5, 0.25, 1.0]])
    ex.arg_dict["data"][:] = xv
    ex.arg_dict["fc_weight"][:] = w
    ex.arg_dict["fc_bias"][:] = np.array([1e-12, -1.0])
    out = ex.forward(is_train=True)[0]
    assert out.dtype == np.float64
    assert np.array_equal(out.asnumpy(), xv @ w.T + np.array([1e-12, -1.0]))  # float64 precision kept
    ex.backward(mx.nd.ones((1, 2), dtype="float64"))
    assert np.array_equal(ex.grad_dict["fc_weight"].asnumpy(), np.vstack([xv, xv]))
    # grad_req per argument still holds; unknown names are refused
    ex2 = y.simple_bind(mx.cpu(), grad_req={"fc_weight": "write"}, data=(1, 3), type_dict={"data": "float64"})
    assert ex2.grad_dict.get("data") is None and ex2.grad_dict["fc_weight"].dtype == np.float64
    with pytest.raises(mx.MXNetError, match="nosuch"):
        y.simple_bind(mx.cpu(), data=(1, 3), type_dict={"nosuch": "float64"})
