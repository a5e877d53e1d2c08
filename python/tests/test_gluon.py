"""mx.gluon: layers against numpy, naming, deferred shapes, hybridize giving
the imperative results, losses, Trainer, and LeNet trained on
Fashion-MNIST (a step count) then exported and run by `mxplug predict`."""
import os
import subprocess

import numpy as np
import pytest

import mxplug as mx
from mxplug import autograd, gluon
from mxplug.gluon import nn
from conftest import BUILD, FASHION, have_fashion


def lenet():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(6, kernel_size=5, activation="tanh"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Conv2D(16, kernel_size=5, activation="tanh"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Flatten(), nn.Dense(120, activation="tanh"), nn.Dense(10))
    return net


def test_dense_deferred_shape_names_and_values():
    layer = nn.Dense(3, in_units=0, activation="relu", prefix="fc_")
    layer.initialize(mx.init.Xavier())
    assert list(layer.collect_params()) == ["fc_weight", "fc_bias"]
    with pytest.raises(gluon.DeferredInitializationError):
        layer.weight.data()
    x = np.random.RandomState(0).normal(size=(4, 5)).astype(np.float32)
    y = layer(mx.nd.array(x)).asnumpy()
    assert layer.weight.shape == (3, 5)
    w = layer.weight.data().asnumpy()
    np.testing.assert_allclose(y, np.maximum(x @ w.T, 0), rtol=1e-5, atol=1e-6)
    seq = nn.HybridSequential()
    with seq.name_scope():
        seq.add(nn.Dense(2), nn.Dense(2))
    names = list(seq.collect_params())
    assert names[0].startswith("hybridsequential") and names[0].endswith("dense0_weight")
    assert names[2].endswith("dense1_weight")


def test_hybridize_matches_imperative_outputs_and_gradients():
    mx.random.seed(3)
    net = lenet()
    net.initialize(mx.init.Xavier())
    x = mx.nd.array(np.random.RandomState(1).uniform(size=(4, 1, 28, 28)).astype(np.float32))
    y = mx.nd.array([1, 2, 3, 4])
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    out_imp = net(x).asnumpy()
    grads_imp = {k: p.grad().asnumpy().copy() for k, p in net.collect_params().items()}
    net.hybridize()
    with autograd.record():
        loss2 = loss_fn(net(x), y)
    loss2.backward()
    np.testing.assert_allclose(net(x).asnumpy(), out_imp, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(loss2.asnumpy(), loss.asnumpy(), rtol=1e-6)
    for k, p in net.collect_params().items():
        np.testing.assert_allclose(p.grad().asnumpy(), grads_imp[k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_losses_against_numpy():
    rng = np.random.RandomState(0)
    pred = rng.normal(size=(5, 4)).astype(np.float32)
    label = np.array([0, 3, 1, 1, 2], np.float32)
    ce = gluon.loss.SoftmaxCrossEntropyLoss()(mx.nd.array(pred), mx.nd.array(label)).asnumpy()
    logp = pred - np.log(np.exp(pred).sum(1, keepdims=True))
    np.testing.assert_allclose(ce, -logp[np.arange(5), label.astype(int)], rtol=1e-5)
    t = rng.normal(size=(5, 4)).astype(np.float32)
    l2 = gluon.loss.L2Loss()(mx.nd.array(pred), mx.nd.array(t)).asnumpy()
    np.testing.assert_allclose(l2, 0.5 * ((pred - t) ** 2).mean(1), rtol=1e-5)


def test_batchnorm_and_dropout_modes():
    bn = nn.BatchNorm(in_channels=0)
    bn.initialize()
    x = np.random.RandomState(2).normal(3, 2, size=(8, 3, 2, 2)).astype(np.float32)
    with autograd.record():
        y = bn(mx.nd.array(x)).asnumpy()
    m = x.mean(axis=(0, 2, 3), keepdims=True)
    v = x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-5), rtol=1e-3, atol=1e-4)
    rm = bn.running_mean.data().asnumpy()
    np.testing.assert_allclose(rm, 0.1 * m.ravel(), rtol=1e-4)  # momentum 0.9 from zeros
    d = nn.Dropout(0.5)
    ones = mx.nd.ones((2000,))
    np.testing.assert_array_equal(d(ones).asnumpy(), np.ones(2000))  # predict mode: identity
    with autograd.record():
        dropped = d(ones).asnumpy()
    assert 700 < (dropped == 0).sum() < 1300


@pytest.mark.skipif(not have_fashion(), reason="Debian package dataset-fashion-mnist not installed")
def test_lenet_trains_exports_and_mxplug_predict_agrees(tmp_path):
    mx.random.seed(11)
    net = lenet()
    net.initialize(mx.init.Xavier())
    net.hybridize()
    it = mx.io.MNISTIter(image=os.path.join(FASHION, "train-images-idx3-ubyte.gz"),
                         label=os.path.join(FASHION, "train-labels-idx1-ubyte.gz"), batch_size=32, shuffle=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # lr 0.05: at 0.1 the accuracy after 250 steps spread over 0.636-0.700
    # across seeds (kernel rounding alone moved seed 11 from above 0.65 to
    # 0.642); at 0.05 it was 0.706-0.788 over seeds 1-8 and 11.
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    steps = 0
    for batch in it:
        with autograd.record():
            loss = loss_fn(net(batch.data[0]), batch.label[0])
        loss.backward()
        trainer.step(32)
        steps += 1
        if steps == 250:
            break
    assert steps == 250
    test = mx.io.MNISTIter(image=os.path.join(FASHION, "t10k-images-idx3-ubyte.gz"),
                           label=os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz"), batch_size=500)
    b = next(iter(test))
    x, y = b.data[0], b.label[0].asnumpy()
    out = net(x).asnumpy()
    acc = (out.argmax(1) == y).mean()
    assert acc >= 0.65, "accuracy %.3f on 500 test images after 250 steps" % acc
    prefix = str(tmp_path / "lenet")
    net.export(prefix, epoch=3)
    assert os.path.isfile(prefix + "-symbol.json") and os.path.isfile(prefix + "-0003.params")
    saved = mx.nd.load(prefix + "-0003.params")
    assert all(k.startswith("arg:") for k in saved)
    np.save(str(tmp_path / "in.npy"), x.asnumpy()[:20])
    env = dict(os.environ, MXP_MANIFEST=os.path.join(BUILD, "plugins", "manifest.yaml"))
    r = subprocess.run([os.path.join(BUILD, "bin", "mxplug"), "predict", "--model", prefix, "--epoch", "3",
                        "--input", str(tmp_path / "in.npy"), "--output", str(tmp_path / "out.npy"), "--quiet"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(str(tmp_path / "out.npy")), out[:20], rtol=1e-4, atol=1e-5)
    # and back into Python: SymbolBlock.imports
    blk = gluon.SymbolBlock.imports(prefix + "-symbol.json", "data", prefix + "-0003.params")
    np.testing.assert_allclose(blk(x).asnumpy(), out, rtol=1e-5, atol=1e-6)


def test_trainer_step_applies_sgd():
    layer = nn.Dense(1, in_units=2, use_bias=False)
    layer.initialize(mx.init.Constant(1.0))
    tr = gluon.Trainer(layer.collect_params(), "sgd", {"learning_rate": 0.5})
    x = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    with autograd.record():
        out = layer(x)
    out.backward()
    tr.step(2)
    np.testing.assert_allclose(layer.weight.data().asnumpy(), [[1 - 0.5 * 4 / 2, 1 - 0.5 * 6 / 2]])
