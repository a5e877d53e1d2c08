"""LeNet on Fashion-MNIST with mx.mod.Module (the symbolic API).

Run from the checkout after `make`:  PYTHONPATH=python /usr/bin/python3 examples/python/lenet_module.py
Writes lenet-symbol.json / lenet-000N.params checkpoints to the current
directory (scorable with `mxplug score` / `mxplug predict`)."""
import logging
import sys

import mxplug as mx

logging.basicConfig(level=logging.INFO)
D = "/usr/share/datasets/fashion-mnist/"
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 1


def lenet():
    data = mx.sym.Variable("data")
    h = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
    h = mx.sym.Activation(h, act_type="tanh")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = mx.sym.Convolution(h, kernel=(5, 5), num_filter=50, name="conv2")
    h = mx.sym.Activation(h, act_type="tanh")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = mx.sym.Flatten(h)
    h = mx.sym.FullyConnected(h, num_hidden=500, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh")
    h = mx.sym.FullyConnected(h, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


train = mx.io.MNISTIter(image=D + "train-images-idx3-ubyte.gz", label=D + "train-labels-idx1-ubyte.gz",
                        batch_size=64, shuffle=True)
val = mx.io.MNISTIter(image=D + "t10k-images-idx3-ubyte.gz", label=D + "t10k-labels-idx1-ubyte.gz", batch_size=100)
mx.random.seed(42)
mod = mx.mod.Module(lenet(), context=mx.cpu())
mod.fit(train, eval_data=val, num_epoch=epochs, optimizer="sgd",
        optimizer_params={"learning_rate": 0.05, "momentum": 0.9}, initializer=mx.init.Xavier(),
        batch_end_callback=mx.callback.Speedometer(64, 200), epoch_end_callback=mx.callback.do_checkpoint("lenet"))
print("test accuracy: %.4f" % mod.score(val, "acc")[0][1])
