"""mx.io iterators, mx.random, metrics, lr schedulers, optimizers,
initializers, callbacks and checkpoints."""
import logging
import os

import numpy as np
import pytest

import mxplug as mx
from conftest import FASHION, have_fashion


def test_ndarray_iter_batches_and_padding():
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    y = np.arange(10, dtype=np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=4)
    assert it.provide_data[0].name == "data" and it.provide_data[0].shape == (4, 3)
    assert it.provide_label[0].name == "softmax_label"
    batches = list(it)
    assert len(batches) == 3 and batches[-1].pad == 2
    it.reset()
    b = next(iter(it))
    np.testing.assert_array_equal(b.data[0].asnumpy(), x[:4])
    np.testing.assert_array_equal(b.label[0].asnumpy(), y[:4])
    it2 = mx.io.NDArrayIter({"a": x}, batch_size=5, last_batch_handle="discard", shuffle=True)
    seen = np.concatenate([bb.data[0].asnumpy() for bb in it2])
    assert sorted(seen[:, 0].tolist()) == sorted(x[:, 0].tolist())
    with pytest.raises(mx.MXNetError):
        mx.io.NDArrayIter(x, y[:5], batch_size=2)


@pytest.mark.skipif(not have_fashion(), reason="Debian package dataset-fashion-mnist not installed")
def test_registered_mnist_iter():
    it = mx.io.MNISTIter(image=os.path.join(FASHION, "t10k-images-idx3-ubyte.gz"),
                         label=os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz"), batch_size=100, flat=True)
    assert it.provide_data[0].shape == (100, 784)
    n = sum(1 for _ in it)
    assert n == 100


def test_random_seed_reproducible():
    mx.random.seed(7)
    a = mx.random.uniform(0, 1, shape=(5,)).asnumpy()
    mx.random.seed(7)
    b = mx.random.uniform(0, 1, shape=(5,)).asnumpy()
    np.testing.assert_array_equal(a, b)
    assert ((a >= 0) & (a < 1)).all()
    n = mx.random.normal(0, 1, shape=(2000,)).asnumpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1


def test_metrics():
    pred = mx.nd.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    label = mx.nd.array([1, 1, 0])
    acc = mx.metric.Accuracy()
    acc.update([label], [pred])
    assert acc.get() == ("accuracy", pytest.approx(1 / 3))
    ce = mx.metric.create("ce")
    ce.update([label], [pred])
    assert ce.get()[1] == pytest.approx(-(np.log(0.9) + np.log(0.2) + np.log(0.3)) / 3, rel=1e-5)
    top = mx.metric.TopKAccuracy(top_k=2)
    top.update([label], [pred])
    assert top.get()[1] == 1.0
    comp = mx.metric.create(["acc", "ce"])
    comp.update([label], [pred])
    assert len(comp.get_name_value()) == 2


def test_lr_schedulers():
    f = mx.lr_scheduler.FactorScheduler(step=10, factor=0.5, base_lr=1.0)
    assert f(5) == 1.0 and f(11) == 0.5 and f(25) == 0.25
    m = mx.lr_scheduler.MultiFactorScheduler(step=[3, 7], factor=0.1, base_lr=1.0)
    assert m(2) == 1.0 and m(4) == pytest.approx(0.1) and m(8) == pytest.approx(0.01)


def test_optimizers_update_as_mxnet_defines():
    w0 = np.array([1.0, -2.0, 3.0], np.float32)
    g = np.array([0.5, 0.5, -1.0], np.float32)
    w, gr = mx.nd.array(w0), mx.nd.array(g)
    sgd = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9)
    sgd.update(0, w, gr)
    sgd.update(0, w, gr)
    mom = -0.1 * g
    want = w0 + mom
    mom = 0.9 * mom - 0.1 * g
    want = want + mom
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-6)
    w = mx.nd.array(w0)
    adam = mx.optimizer.create("adam", learning_rate=0.01)
    adam.update(0, w, gr)
    m = 0.1 * g
    v = 0.001 * g * g
    lr = 0.01 * np.sqrt(1 - 0.999) / (1 - 0.9)
    np.testing.assert_allclose(w.asnumpy(), w0 - lr * m / (np.sqrt(v) + 1e-8), rtol=1e-5)
    w = mx.nd.array(w0)
    rms = mx.optimizer.RMSProp(learning_rate=0.01)
    rms.update(0, w, gr)
    n = 0.1 * g * g
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.01 * g / np.sqrt(n + 1e-8), rtol=1e-5)


def test_initializers():
    mx.random.seed(1)
    w = mx.nd.zeros((64, 32))
    mx.init.Xavier()("fc_weight", w)
    lim = np.sqrt(3.0 / ((64 + 32) / 2))
    a = w.asnumpy()
    assert np.abs(a).max() <= lim and np.abs(a).max() > 0.9 * lim
    b = mx.nd.ones((4,))
    mx.init.Xavier()("fc_bias", b)
    assert (b.asnumpy() == 0).all()
    g = mx.nd.zeros((4,))
    mx.init.Uniform(0.1)("bn_gamma", g)
    assert (g.asnumpy() == 1).all()
    c = mx.nd.zeros((3,))
    mx.init.Constant(2.5)._init_weight("c", c)
    assert (c.asnumpy() == 2.5).all()
    with pytest.raises(mx.MXNetError):
        mx.init.Normal()("strange_name", c)
    u = mx.nd.zeros((1000,))
    mx.init.Uniform(0.5)("u_weight", u)
    assert np.abs(u.asnumpy()).max() <= 0.5


def test_checkpoint_roundtrip_and_callbacks(tmp_path, caplog):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    prefix = str(tmp_path / "m")
    arg = {"fc_weight": mx.nd.ones((2, 3)), "fc_bias": mx.nd.zeros((2,))}
    mx.callback.do_checkpoint(prefix)(0, net, arg, {})
    sym, a2, x2 = mx.model.load_checkpoint(prefix, 1)
    assert sym.list_arguments() == net.list_arguments()
    np.testing.assert_array_equal(a2["fc_weight"].asnumpy(), np.ones((2, 3)))
    sp = mx.callback.Speedometer(10, frequent=2)
    m = mx.metric.Accuracy()
    with caplog.at_level(logging.INFO):
        for i in range(1, 5):
            sp(mx.callback.BatchEndParam(0, i, m, None))
    assert "samples/sec" in caplog.text


@pytest.mark.skipif(not mx._lib.has("mxp_kvstore_create"), reason="this libmxplug has no KVStore front end")
def test_kvstore_local_push_pull_and_optimizer():
    kv = mx.kv.create("local")
    assert kv.type == "local" and kv.rank == 0 and kv.num_workers == 1
    kv.init(3, mx.nd.zeros((2,)))
    kv.push(3, [mx.nd.ones((2,)), mx.nd.array([2.0, 5.0])])
    out = mx.nd.zeros((2,))
    kv.pull(3, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [3, 6])
    kv.init("w", mx.nd.ones((2,)))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5))
    kv.push("w", mx.nd.array([1.0, 2.0]))
    kv.pull("w", out=out)
    np.testing.assert_allclose(out.asnumpy(), [0.5, 0.0])
    with pytest.raises(mx.MXNetError):
        mx.kv.create("no_such_type")
