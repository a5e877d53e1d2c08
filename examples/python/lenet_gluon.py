"""LeNet on Fashion-MNIST with Gluon and autograd (imperative, or hybridized
with --hybridize), then exported for `mxplug predict`.

Run from the checkout after `make`:
    PYTHONPATH=python /usr/bin/python3 examples/python/lenet_gluon.py [--hybridize] [--epochs N] [--batches B]
Writes lenet_gluon-symbol.json and lenet_gluon-0000.params."""
import argparse
import time

import mxplug as mx
from mxplug import autograd, gluon
from mxplug.gluon import nn

p = argparse.ArgumentParser()
p.add_argument("--hybridize", action="store_true")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--batches", type=int, default=0, help="stop each epoch after this many batches (0: all)")
args = p.parse_args()
D = "/usr/share/datasets/fashion-mnist/"

net = nn.HybridSequential()
with net.name_scope():
    net.add(nn.Conv2D(20, kernel_size=5, activation="tanh"), nn.MaxPool2D(pool_size=2, strides=2),
            nn.Conv2D(50, kernel_size=5, activation="tanh"), nn.MaxPool2D(pool_size=2, strides=2),
            nn.Flatten(), nn.Dense(500, activation="tanh"), nn.Dense(10))
mx.random.seed(42)
net.initialize(mx.init.Xavier())
if args.hybridize:
    net.hybridize()
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
train = mx.io.MNISTIter(image=D + "train-images-idx3-ubyte.gz", label=D + "train-labels-idx1-ubyte.gz",
                        batch_size=64, shuffle=True)
val = mx.io.MNISTIter(image=D + "t10k-images-idx3-ubyte.gz", label=D + "t10k-labels-idx1-ubyte.gz", batch_size=100)
for epoch in range(args.epochs):
    train.reset()
    metric = mx.metric.Accuracy()
    tic, n = time.time(), 0
    for batch in train:
        x, y = batch.data[0], batch.label[0]
        with autograd.record():
            out = net(x)
            loss = loss_fn(out, y)
        loss.backward()
        trainer.step(x.shape[0])
        metric.update([y], [out])
        n += x.shape[0]
        if args.batches and n >= args.batches * 64:
            break
    print("epoch %d: train %s=%.4f, %.0f samples/s" % ((epoch,) + metric.get() + (n / (time.time() - tic),)))
val.reset()
metric = mx.metric.Accuracy()
for batch in val:
    metric.update([batch.label[0]], [net(batch.data[0])])
print("test %s=%.4f" % metric.get())
net.export("lenet_gluon")
print("exported lenet_gluon-symbol.json, lenet_gluon-0000.params "
      "(try: mxplug predict --model lenet_gluon --epoch 0 --input IMAGES.npy)")
