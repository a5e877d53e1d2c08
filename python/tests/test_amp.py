"""mx.amp (mx.contrib.amp): convert_symbol / convert_model to bfloat16,
the converted graph against the float32 one with the same weights (forward
and float32 weight gradients within bfloat16's tolerance), a Module trained
on the converted symbol, save_checkpoint's remove_amp_cast, and refusals."""
import json

import numpy as np
import pytest

import mxplug as mx


def convnet():
    x = mx.sym.Variable("data")
    x = mx.sym.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), name="conv1")
    x = mx.sym.BatchNorm(x, fix_gamma=False, name="bn1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = mx.sym.Flatten(x, name="flat")
    x = mx.sym.FullyConnected(x, num_hidden=4, name="fc1")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def ops_of(sym):
    return [n["op"] for n in json.loads(sym.tojson())["nodes"]]


def test_convert_symbol_casts_into_the_low_precision_ops_only():
    net = convnet()
    before = net.tojson()
    lp = mx.amp.convert_symbol(net, target_dtype="bfloat16")
    assert net.tojson() == before, "the input symbol changed"
    assert lp.list_arguments() == net.list_arguments()
    assert lp.list_auxiliary_states() == net.list_auxiliary_states()
    nodes = json.loads(lp.tojson())["nodes"]
    casts = {n["name"]: n["attrs"]["dtype"] for n in nodes if n["op"] == "amp_cast"}
    # data and the two ops' weights and biases to bf16; BatchNorm, ReLU,
    # pooling and flatten follow their bf16 input; only the FC's output
    # (into SoftmaxOutput) comes back to float32
    assert casts == {"data_bfloat16": "bfloat16", "conv1_weight_bfloat16": "bfloat16",
                     "conv1_bias_bfloat16": "bfloat16", "fc1_weight_bfloat16": "bfloat16",
                     "fc1_bias_bfloat16": "bfloat16", "fc1_output_float32": "float32"}, casts
    assert mx.contrib.amp is mx.amp
    # an explicit op list: only FullyConnected in bf16
    fc_only = mx.amp.convert_symbol(net, "bfloat16", target_dtype_ops=["FullyConnected"])
    names = {n["name"] for n in json.loads(fc_only.tojson())["nodes"] if n["op"] == "amp_cast"}
    assert names == {"flat_output_bfloat16", "fc1_weight_bfloat16", "fc1_bias_bfloat16", "fc1_output_float32"}


def bind_with(sym, params, aux, x, y):
    ex = sym.simple_bind(mx.cpu(), data=x.shape, softmax_label=y.shape)
    for k, v in params.items():
        ex.arg_dict[k][:] = v
    for k, v in aux.items():
        ex.aux_dict[k][:] = v
    ex.forward(is_train=True, data=x, softmax_label=y)
    ex.backward()
    return ex


def test_bf16_graph_matches_the_float32_graph():
    rng = np.random.RandomState(3)
    net = convnet()
    x = rng.uniform(-1, 1, (16, 2, 8, 8)).astype(np.float32)
    y = rng.randint(0, 4, 16).astype(np.float32)
    shapes, _, aux_shapes = net.infer_shape(data=x.shape, softmax_label=y.shape)
    params = {n: rng.uniform(-0.5, 0.5, s).astype(np.float32)
              for n, s in zip(net.list_arguments(), shapes) if n not in ("data", "softmax_label")}
    aux = {n: (np.ones(s) if n.endswith("var") else np.zeros(s)).astype(np.float32)
           for n, s in zip(net.list_auxiliary_states(), aux_shapes)}
    lp_sym, lp_params, lp_aux = mx.amp.convert_model(net, params, aux, target_dtype="bfloat16")
    assert lp_params is params and lp_aux is aux  # float32 master weights, as given
    ref = bind_with(net, params, aux, x, y)
    low = bind_with(lp_sym, params, aux, x, y)
    p_ref, p_low = ref.outputs[0].asnumpy(), low.outputs[0].asnumpy()
    assert low.outputs[0].dtype == np.float32
    # softmax probabilities: bf16 keeps 8 bits of mantissa
    np.testing.assert_allclose(p_low, p_ref, atol=0.03)
    assert np.abs(p_low - p_ref).max() > 0, "no bf16 rounding seen: did the ops run in float32?"
    # float32 gradients, relative error in norm.  The conv weight's is the
    # loosest: training-mode BatchNorm subtracts the batch mean from the
    # gradient, and what is left of 8-bit-mantissa products after that
    # cancellation carries ~10% error (conv1_bias's is zero in exact
    # arithmetic, so it is not compared).
    for name, tol in (("fc1_weight", 0.02), ("fc1_bias", 0.02), ("bn1_gamma", 0.08), ("bn1_beta", 0.08),
                      ("conv1_weight", 0.2)):
        g_ref, g_low = ref.grad_dict[name].asnumpy(), low.grad_dict[name].asnumpy()
        assert low.grad_dict[name].dtype == np.float32
        err = np.linalg.norm(g_low - g_ref) / np.linalg.norm(g_ref)
        assert err <= tol, "%s: relative error %.3g" % (name, err)


TEMPLATES = np.random.RandomState(7).normal(size=(4, 2, 8, 8)).astype(np.float32)


def separable(n, rng):
    """Four classes: a fixed random pattern each, under as much noise."""
    y = rng.randint(0, 4, n)
    x = (TEMPLATES[y] + rng.normal(size=(n, 2, 8, 8))).astype(np.float32)
    return x, y.astype(np.float32)


def test_module_trains_the_converted_symbol_and_saves_it_without_casts(tmp_path):
    rng = np.random.RandomState(0)
    mx.random.seed(1)
    x, y = separable(512, rng)
    it = mx.io.NDArrayIter(x, y, batch_size=32, shuffle=True)
    net = convnet()
    mod = mx.mod.Module(mx.amp.convert_symbol(net, "bfloat16"))
    mod.fit(it, num_epoch=4, optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.9},
            initializer=mx.init.Xavier())
    xv, yv = separable(256, rng)
    (_, acc), = mod.score(mx.io.NDArrayIter(xv, yv, batch_size=32), "acc")
    assert acc >= 0.9, "validation accuracy %.3f" % acc
    arg, _ = mod.get_params()
    assert all(v.dtype == np.float32 for v in arg.values())
    mod.save_checkpoint(str(tmp_path / "amp"), 1)
    saved = mx.sym.load(str(tmp_path / "amp-symbol.json"))
    assert "amp_cast" not in ops_of(saved)
    assert saved.tojson() == net.tojson()
    mod.save_checkpoint(str(tmp_path / "kept"), 1, remove_amp_cast=False)
    assert ops_of(mx.sym.load(str(tmp_path / "kept-symbol.json"))).count("amp_cast") == 6
    # the float32 checkpoint scores the same data close to the bf16 module
    mod2 = mx.mod.Module.load(str(tmp_path / "amp"), 1)
    mod2.bind([("data", (32, 2, 8, 8))], [("softmax_label", (32,))], for_training=False)
    (_, acc2), = mod2.score(mx.io.NDArrayIter(xv, yv, batch_size=32), "acc")
    assert abs(acc2 - acc) <= 0.03, (acc, acc2)


def test_refusals_name_the_argument():
    net = convnet()
    for kw, word in (({"fp32_ops": ["Pooling"]}, "fp32_ops"),
                     ({"conditional_fp32_ops": [("Activation", "act_type", ["softrelu"])]}, "conditional_fp32_ops"),
                     ({"excluded_sym_names": ["fc1"]}, "excluded_sym_names"),
                     ({"cast_optional_params": True}, "cast_optional_params"),
                     ({"target_dtype_ops": []}, "target_dtype_ops")):
        with pytest.raises(mx.MXNetError, match=word):
            mx.amp.convert_symbol(net, "bfloat16", **kw)
    with pytest.raises(mx.MXNetError, match="not bfloat16 or float16"):
        mx.amp.convert_symbol(net, "float32")
    with pytest.raises(mx.MXNetError, match="Symbol"):
        mx.amp.convert_symbol("net", "bfloat16")
