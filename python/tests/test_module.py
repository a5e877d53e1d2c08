"""mx.mod.Module: fit of the MLP on Fashion-MNIST for one epoch (>= 80 % on
the test set: a step count, 600 updates, not a timing), score, predict,
checkpoints and resuming from them."""
import os

import numpy as np
import pytest

import mxplug as mx
from conftest import FASHION, have_fashion


def mlp():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=128, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=64, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def fashion(part, batch, shuffle=False):
    pre = "train" if part == "train" else "t10k"
    return mx.io.MNISTIter(image=os.path.join(FASHION, pre + "-images-idx3-ubyte.gz"),
                           label=os.path.join(FASHION, pre + "-labels-idx1-ubyte.gz"), batch_size=batch,
                           flat=True, shuffle=shuffle)


@pytest.mark.skipif(not have_fashion(), reason="Debian package dataset-fashion-mnist not installed")
def test_mlp_fit_one_epoch_reaches_80_percent(tmp_path):
    mx.random.seed(42)
    train, val = fashion("train", 100, True), fashion("test", 100)
    mod = mx.mod.Module(mlp(), context=mx.cpu())
    batches = []
    mod.fit(train, num_epoch=1, optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=mx.init.Xavier(), eval_metric="acc",
            batch_end_callback=lambda p: batches.append(p.nbatch),
            epoch_end_callback=mx.callback.do_checkpoint(str(tmp_path / "mlp")))
    assert len(batches) == 600  # 60,000 samples / 100: the step count
    (name, acc), = mod.score(val, mx.metric.Accuracy())
    assert name == "accuracy" and acc >= 0.80, "test accuracy %.4f after one epoch" % acc
    pred = mod.predict(val)
    assert pred.shape == (10000, 10)
    np.testing.assert_allclose(pred.asnumpy().sum(1), 1, rtol=1e-4)
    val.reset()
    labels = np.concatenate([b.label[0].asnumpy() for b in val])
    assert (pred.asnumpy().argmax(1) == labels).mean() == pytest.approx(acc)
    # The checkpoint written by do_checkpoint scores the same in a fresh module.
    assert os.path.isfile(str(tmp_path / "mlp-0001.params"))
    mod2 = mx.mod.Module.load(str(tmp_path / "mlp"), 1)
    mod2.bind(val.provide_data, val.provide_label, for_training=False)
    assert mod2.score(val, "acc")[0][1] == pytest.approx(acc)


def test_module_steps_on_ndarray_iter(tmp_path):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=16)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc"),
                               name="softmax")
    mod = mx.mod.Module(net)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(mx.init.Zero())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 1.0})
    for _ in range(20):
        it.reset()
        for b in it:
            mod.forward_backward(b)
            mod.update()
    assert mod.score(it, "acc")[0][1] > 0.9
    mod.save_checkpoint(str(tmp_path / "lin"), 3, save_optimizer_states=True)
    assert os.path.isfile(str(tmp_path / "lin-0003.states"))
    arg, aux = mod.get_params()
    assert set(arg) == {"fc_weight", "fc_bias"}
    with pytest.raises(mx.MXNetError):
        mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)])
    with pytest.raises(mx.MXNetError):
        mx.mod.Module(net).predict(it)
