"""bench/python/bench.py — the Python package against PyTorch (and numpy):

1. Imperative op overhead: a 1-element `c = a + b` in a Python loop
   (mxplug NDArray, PyTorch eager tensor, numpy array), microseconds per op,
   mxplug's loop waiting once at the end (work is asynchronous); the wall
   time is the closing line's, the calling thread's CPU time is printed
   beside it (on a loaded machine the wall time includes waiting for a
   core, for mxplug's engine workers too).
2. LeNet trained with Gluon + autograd, imperative and hybridized, against
   the same PyTorch loop: same architecture, same initial weights (copied
   from the Gluon net), same Fashion-MNIST batches, SGD momentum 0.9,
   batch 64, mean cross-entropy; samples per second over STEPS steps after
   WARMUP, median over ROUNDS interleaved rounds (mxplug, torch, mxplug, ...).

Env: BENCH_PY_ROUNDS (3), BENCH_PY_STEPS (60), BENCH_PY_OPS (20000).
The last three lines are exactly
    python op_overhead mxplug_us=<x> torch_us=<y>
    python train_lenet_gluon mode=imperative mxplug_sps=<x> torch_sps=<y>
    python train_lenet_gluon mode=hybrid mxplug_sps=<x> torch_sps=<y>
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mxplug as mx  # noqa: E402
from mxplug import autograd, gluon  # noqa: E402
from mxplug.gluon import nn  # noqa: E402

import torch  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_PY_ROUNDS", "3"))
STEPS = int(os.environ.get("BENCH_PY_STEPS", "60"))
OPS = int(os.environ.get("BENCH_PY_OPS", "20000"))
WARMUP = 5
BATCH = 64
THREADS = int(os.environ.get("MXP_NUM_THREADS", "2"))
torch.set_num_threads(THREADS)
torch.set_flush_denormal(True)  # mxplug's engine threads run with flush-to-zero too
D = "/usr/share/datasets/fashion-mnist/"


# Each returns (wall us per op, CPU us per op of the calling thread): on a
# loaded machine the wall time also holds what other processes took, and
# for mxplug what its engine worker threads waited for a core.
def op_overhead_mxplug(n):
    a, b = mx.nd.ones((1,)), mx.nd.ones((1,))
    for _ in range(100):
        c = a + b
    mx.nd.waitall()
    t, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        c = a + b
    c.wait_to_read()
    mx.nd.waitall()
    return (time.perf_counter() - t) / n * 1e6, (time.thread_time() - c0) / n * 1e6


def op_overhead_torch(n):
    a, b = torch.ones(1), torch.ones(1)
    for _ in range(100):
        c = a + b
    t, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        c = a + b
    del c
    return (time.perf_counter() - t) / n * 1e6, (time.thread_time() - c0) / n * 1e6


def op_overhead_numpy(n):
    a, b = np.ones(1, np.float32), np.ones(1, np.float32)
    t, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        c = a + b
    del c
    return (time.perf_counter() - t) / n * 1e6, (time.thread_time() - c0) / n * 1e6


def batches(n):
    it = mx.io.MNISTIter(image=D + "train-images-idx3-ubyte.gz", label=D + "train-labels-idx1-ubyte.gz",
                         batch_size=BATCH)
    out = []
    for b in it:
        out.append((b.data[0].asnumpy().copy(), b.label[0].asnumpy().copy()))
        if len(out) == n:
            break
    return out


def gluon_lenet():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(6, kernel_size=5, activation="tanh"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Conv2D(16, kernel_size=5, activation="tanh"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Flatten(), nn.Dense(120, activation="tanh"), nn.Dense(10))
    return net


def torch_lenet(weights):
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
                              torch.nn.Conv2d(6, 16, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
                              torch.nn.Flatten(), torch.nn.Linear(256, 120), torch.nn.Tanh(),
                              torch.nn.Linear(120, 10))
    params = [p for p in net.parameters()]
    assert len(params) == len(weights)
    with torch.no_grad():
        for p, w in zip(params, weights):
            assert tuple(p.shape) == w.shape, (p.shape, w.shape)
            p.copy_(torch.from_numpy(w))
    return net


def train_mxplug(initial, data, hybrid):
    net = gluon_lenet()
    net.initialize(mx.init.Xavier())
    x0 = mx.nd.array(data[0][0])
    net(x0)  # completes deferred shapes
    for p, w in zip(net.collect_params().values(), initial):
        p.set_data(w)
    if hybrid:
        net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    nd_data = [(mx.nd.array(x), mx.nd.array(y)) for x, y in data]

    def step(i):
        x, y = nd_data[i % len(nd_data)]
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(BATCH)
        return loss
    for i in range(WARMUP):
        step(i)
    mx.nd.waitall()
    t = time.perf_counter()
    for i in range(STEPS):
        last = step(WARMUP + i)
    last.wait_to_read()
    mx.nd.waitall()
    return STEPS * BATCH / (time.perf_counter() - t), float(last.mean().asscalar())


def train_torch(initial, data):
    net = torch_lenet(initial)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    td = [(torch.from_numpy(x), torch.from_numpy(y).long()) for x, y in data]

    def step(i):
        x, y = td[i % len(td)]
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss
    for i in range(WARMUP):
        step(i)
    t = time.perf_counter()
    for i in range(STEPS):
        last = step(WARMUP + i)
    return STEPS * BATCH / (time.perf_counter() - t), float(last.item())


def main():
    print("bench/python: %d rounds, %d training steps of batch %d (+%d warm-up), %d ops, %d threads (%s)" %
          (ROUNDS, STEPS, BATCH, WARMUP, OPS, THREADS, torch.__version__))
    ops = {"mxplug": [], "torch": [], "numpy": []}
    for _ in range(ROUNDS):
        ops["mxplug"].append(op_overhead_mxplug(OPS))
        ops["torch"].append(op_overhead_torch(OPS))
        ops["numpy"].append(op_overhead_numpy(OPS))
    for k, v in ops.items():
        print("op_overhead %s rounds_us=%s calling_thread_cpu_us=%s" % (
            k, " ".join("%.2f" % x[0] for x in v), " ".join("%.2f" % x[1] for x in v)))
    ops = {k: [x[0] for x in v] for k, v in ops.items()}
    data = batches(WARMUP + STEPS)
    mx.random.seed(1)
    ref = gluon_lenet()
    ref.initialize(mx.init.Xavier())
    ref(mx.nd.array(data[0][0]))
    initial = [p.data().asnumpy() for p in ref.collect_params().values()]
    sps = {"imperative": [], "hybrid": [], "torch": []}
    for r in range(ROUNDS):
        for mode in ("imperative", "hybrid"):
            s, loss = train_mxplug(initial, data, mode == "hybrid")
            sps[mode].append(s)
            print("round %d mxplug %s: %.1f samples/s, last loss %.4f" % (r, mode, s, loss))
        s, loss = train_torch(initial, data)
        sps["torch"].append(s)
        print("round %d torch eager: %.1f samples/s, last loss %.4f" % (r, s, loss))
    med = {k: statistics.median(v) for k, v in sps.items()}
    print("python op_overhead numpy_us=%.2f (reference)" % statistics.median(ops["numpy"]))
    print("python op_overhead mxplug_us=%.2f torch_us=%.2f" % (statistics.median(ops["mxplug"]),
                                                               statistics.median(ops["torch"])))
    print("python train_lenet_gluon mode=imperative mxplug_sps=%.1f torch_sps=%.1f" % (med["imperative"], med["torch"]))
    print("python train_lenet_gluon mode=hybrid mxplug_sps=%.1f torch_sps=%.1f" % (med["hybrid"], med["torch"]))


if __name__ == "__main__":
    main()
