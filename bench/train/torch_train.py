#!/usr/bin/python3
"""bench/train/torch_train.py — the PyTorch side of `make bench-train`.

Trains the same nets as examples/{lenet,mlp} (LeNet: conv5x5x20-relu-max2,
conv5x5x50-relu-max2, fc500-relu, fc10; MLP: 784-128-64-10 with relu) on
Fashion-MNIST held in memory, with the settings of the mxplug side
(bench/train/bench.c): batch 64, SGD momentum 0.9, lr 0.01 (x0.1 for the
epochs from LR_DECAY_EPOCH = 8 on, 0-based: bench.c's MultiFactorScheduler
step at update 8 * batches-per-epoch, or LR_STEPS; lr_drop keeps MXNet's
momentum semantics across the drop), mean
cross-entropy (= SoftmaxOutput with rescale_grad 1/batch), pixels / 256 as
MNISTIter scales them, a fresh shuffle per epoch, the short last batch
dropped, weights ~ N(0, 2/fan_in) (Kaiming normal = MXNet's
Xavier(gaussian, in, 2)), biases 0.  2 threads, flush-to-zero on.
With BENCH_SHARE_DIR set (run.sh sets it), the initial weights and every
batch's sample order come from the files the mxplug side wrote there
(params.txt / params.bin, order.bin), so both sides run the same
experiment.  Only the training loop is timed (all epochs, incl. the running train
accuracy, which the mxplug side computes too); test accuracy is measured
after training.

ResNet-20 (examples/resnet): the class below, parameters matched by name
to mxplug's; BENCH_INPUT=32 zero-pads the 28x28 images to 32x32 and
TRAIN_LIMIT=N trains on the first N images, as bench.c does; LR_STEPS as
bench.c.  BENCH_DUMP=DIR writes the trained parameters and BatchNorm
statistics (under MXNet's names) to DIR/torch.{txt,bin}, for
compare_params.py.

usage: torch_train.py lenet|mlp|resnet20 DATA_DIR EPOCHS [SEED]
prints: torch <net> sps=<samples/s> acc=<test accuracy> time=<s> train_acc=<last epoch>
"""
import gzip
import contextlib
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn


def idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def find(d, base):
    for p in (os.path.join(d, base), os.path.join(d, base + ".gz")):
        if os.path.exists(p):
            return p
    sys.exit("torch_train.py: no %s[.gz] in %s" % (base, d))


def load(d, split, flat):
    x = idx(find(d, split + "-images-idx3-ubyte")).astype(np.float32) / 256.0
    y = idx(find(d, split + "-labels-idx1-ubyte")).astype(np.int64)
    limit = int(os.environ.get("TRAIN_LIMIT") or 0)
    if split == "train" and 0 < limit < len(x):
        x, y = x[:limit], y[:limit]
    x = x.reshape(len(x), 784) if flat else x.reshape(len(x), 1, 28, 28)
    side = int(os.environ.get("BENCH_INPUT") or 28)
    if not flat and side != 28:
        off = (side - 28) // 2
        p = np.zeros((len(x), 1, side, side), np.float32)
        p[:, :, off:off + 28, off:off + 28] = x
        x = p
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y)


class ResNet20(nn.Module):
    """examples/resnet/resnet20-symbol.json (make_resnet.py): conv3x3 16,
    3 stages x 3 post-activation basic blocks (16, 32, 64 filters, stride 2
    and a 1x1 conv + BN shortcut at the first block of stages 2 and 3),
    global average pooling, fc 10.  BatchNorm eps 1e-5, momentum 0.1
    (MXNet's 0.9); after training the running variances are made MXNet's
    biased ones (mxnet_moving_var).  mx_params() names every parameter as the symbol does,
    so the shared initial weights are matched by name."""

    def __init__(self):
        super().__init__()
        self.names = {}
        self.conv0, self.bn0 = self._cbn(1, 16, 3, 1, "conv0", "bn0")
        self.blocks = nn.ModuleList()
        cin = 16
        for s, f in enumerate((16, 32, 64), start=1):
            for u in range(1, 4):
                p = "stage%d_unit%d" % (s, u)
                stride = 2 if (s > 1 and u == 1) else 1
                b = nn.Module()
                b.c1, b.b1 = self._cbn(cin, f, 3, stride, p + "_conv1", p + "_bn1")
                b.c2, b.b2 = self._cbn(f, f, 3, 1, p + "_conv2", p + "_bn2")
                b.sc = None
                if stride != 1:
                    b.sc = nn.Sequential(*self._cbn(cin, f, 1, stride, p + "_sc", p + "_sc_bn"))
                self.blocks.append(b)
                cin = f
        self.fc = nn.Linear(64, 10)
        self.names[self.fc.weight] = "fc1_weight"
        self.names[self.fc.bias] = "fc1_bias"

    def _cbn(self, cin, cout, k, stride, cname, bname):
        c = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        b = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)
        self.names[c.weight] = cname + "_weight"
        self.names[b.weight] = bname + "_gamma"
        self.names[b.bias] = bname + "_beta"
        return c, b

    def mx_params(self):
        return {self.names[p]: p for p in self.parameters()}

    def mxnet_moving_var(self, x):
        """Turn every running_var into MXNet's moving_var, exactly.
        PyTorch's running_var averages the unbiased batch variance (n/(n-1)
        times the biased one, n = batch x height x width of that layer),
        MXNet's moving_var the biased one.  From 1 with momentum m after k
        updates, running = m^k + (1-m) sum_i m^(k-1-i) n/(n-1) var_i, so
        MXNet's value is m^k + (running - m^k) (n-1)/n.  n per layer from
        one forward of x (a training batch) in eval mode, which changes no
        statistics.  Run after training, outside the timed loop."""
        bns = [m for m in self.modules() if isinstance(m, nn.BatchNorm2d)]
        n = {}
        hooks = [m.register_forward_pre_hook(lambda mod, inp: n.__setitem__(mod, inp[0].numel() // inp[0].shape[1]))
                 for m in bns]
        self.eval()
        with torch.no_grad():
            self(x)
            for m in bns:
                mk = (1.0 - m.momentum) ** int(m.num_batches_tracked)
                m.running_var.copy_(mk + (m.running_var.double() - mk) * (n[m] - 1) / n[m])
        for h in hooks:
            h.remove()

    def mx_aux(self):
        """The BatchNorm running statistics under MXNet's aux names."""
        out = {}
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                base = self.names[m.weight][:-len("_gamma")]
                out[base + "_moving_mean"] = m.running_mean
                out[base + "_moving_var"] = m.running_var
        return out

    def forward(self, x):
        x = torch.relu(self.bn0(self.conv0(x)))
        for b in self.blocks:
            y = torch.relu(b.b1(b.c1(x)))
            y = b.b2(b.c2(y))
            x = torch.relu(y + (b.sc(x) if b.sc is not None else x))
        return self.fc(torch.flatten(torch.mean(x, dim=(2, 3), keepdim=True), 1))


def net(name):
    if name == "lenet":
        m = nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    elif name == "mlp":
        m = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    elif name == "resnet20":
        return ResNet20()  # initial weights come from BENCH_SHARE_DIR
    else:
        sys.exit("torch_train.py: net must be lenet, mlp or resnet20")
    for mod in m.modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(mod.weight, mode="fan_in", nonlinearity="relu")
            nn.init.zeros_(mod.bias)
    return m


LR_DECAY_EPOCH = 8
LR_FACTOR = 0.1


def lr_steps(epochs, nb):
    """bench.c's MultiFactorScheduler steps, in updates: LR_STEPS (comma-
    separated) if set, else LR_DECAY_EPOCH epochs when there are more.
    MXNet takes lr x LR_FACTOR for every update whose 1-based count exceeds
    a step, i.e. from the 0-based update index `step` on."""
    v = os.environ.get("LR_STEPS")
    if v:
        return [int(x) for x in v.split(",")]
    return [LR_DECAY_EPOCH * nb] if epochs > LR_DECAY_EPOCH else []


def lr_drop(opt, lr):
    """lr x LR_FACTOR from this update on, with MXNet's momentum semantics.
    MXNet keeps the momentum in steps (mom = 0.9 mom - lr g; w += mom), so
    what is pending at a drop still moves the weights at the old lr and
    fades over ~10 updates; PyTorch keeps it in gradients (buf = 0.9 buf +
    g; w -= lr buf), so the drop would scale the pending momentum at once.
    Scaling every buffer by old/new lr once makes PyTorch's steps MXNet's
    exactly from here on."""
    new = lr * LR_FACTOR
    for group in opt.param_groups:
        group["lr"] = new
        for p in group["params"]:
            buf = opt.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                buf.mul_(lr / new)
    return new


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    name, d, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    torch.set_flush_denormal(True)
    torch.manual_seed(seed)
    flat = name == "mlp"
    xtr, ytr = load(d, "train", flat)
    xte, yte = load(d, "t10k", flat)
    model = net(name)
    share = os.environ.get("BENCH_SHARE_DIR")
    order = None
    if share:
        # mxplug's initial weights and batch order (bench.c share_start).
        raw = np.fromfile(os.path.join(share, "params.bin"), dtype=np.float32)
        off = 0
        with open(os.path.join(share, "params.txt")) as f:
            specs = [line.split() for line in f if line.strip()]
        params = list(model.parameters())
        if len(specs) != len(params):
            sys.exit("torch_train.py: %d shared parameters for %d" % (len(specs), len(params)))
        if hasattr(model, "mx_params"):  # matched by MXNet name, not by order
            by_name = model.mx_params()
            missing = [sp[0] for sp in specs if sp[0] not in by_name]
            if missing:
                sys.exit("torch_train.py: no parameter named %s in the PyTorch net" % missing[0])
            params = [by_name[sp[0]] for sp in specs]
        with torch.no_grad():
            for (pname, *dims), p in zip(specs, params):
                shape = tuple(int(d) for d in dims)
                if shape != tuple(p.shape):
                    sys.exit("torch_train.py: %s has shape %s, the net wants %s" % (pname, shape, tuple(p.shape)))
                cnt = int(np.prod(shape))
                if off + cnt > raw.size:
                    sys.exit("torch_train.py: %s/params.bin ends inside %s" % (share, pname))
                p.copy_(torch.from_numpy(raw[off:off + cnt].reshape(shape)))
                off += cnt
        if off != raw.size:
            sys.exit("torch_train.py: %s/params.bin has %d floats, params.txt names %d" % (share, raw.size, off))
        order = torch.from_numpy(np.fromfile(os.path.join(share, "order.bin"), dtype=np.int32).astype(np.int64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    bs = 64
    nb = len(xtr) // bs
    if order is not None and len(order) != epochs * nb * bs:
        sys.exit("torch_train.py: %s/order.bin has %d sample indices, %d epochs need %d"
                 % (share, len(order), epochs, epochs * nb * bs))
    g = torch.Generator().manual_seed(seed)
    # TORCH_AUTOCAST=bf16: PyTorch's own CPU mixed precision (bf16 conv and
    # linear, fp32 weights and optimizer), the peer of mxplug's --dtype bfloat16.
    bf16 = os.environ.get("TORCH_AUTOCAST") == "bf16"
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    steps = lr_steps(epochs, nb)
    lr, si = 0.01, 0
    model.train()
    # Timed from the end of the first batch, as bench.c times mxplug (whose
    # first batch runs the convolution tuning): warm-up on both sides is
    # left out, and printed as first=.
    t0 = time.perf_counter()
    t_first = None
    for ep in range(epochs):
        if order is not None:
            perm = order[ep * nb * bs:(ep + 1) * nb * bs]
        else:
            perm = torch.randperm(len(xtr), generator=g)
        correct = torch.zeros((), dtype=torch.int64)
        for b in range(nb):
            if si < len(steps) and ep * nb + b >= steps[si]:
                lr, si = lr_drop(opt, lr), si + 1
            i = perm[b * bs:(b + 1) * bs]
            x, y = xtr[i], ytr[i]
            opt.zero_grad(set_to_none=True)
            with autocast():
                out = model(x)
                loss = lossf(out, y)
            loss.backward()
            opt.step()
            correct += (out.argmax(1) == y).sum()
            if t_first is None:
                t_first = time.perf_counter()
        train_acc = correct.item() / (nb * bs)
    t = time.perf_counter() - t_first
    if hasattr(model, "mxnet_moving_var"):
        model.mxnet_moving_var(xtr[:bs])
    dump = os.environ.get("BENCH_DUMP")  # diagnosis: bench.c's write_params, PyTorch's side
    if dump and share:
        named = list(zip([sp[0] for sp in specs], params))
        if hasattr(model, "mx_aux"):
            named += list(model.mx_aux().items())
        with open(os.path.join(dump, "torch.txt"), "w") as ft, open(os.path.join(dump, "torch.bin"), "wb") as fb:
            for pname, p in named:
                ft.write("%s %s\n" % (pname, " ".join(str(d) for d in p.shape)))
                fb.write(p.detach().numpy().astype(np.float32).tobytes())
    model.eval()
    with torch.no_grad():
        hit = 0
        for b in range(0, len(xte), 1000):
            with autocast():
                hit += (model(xte[b:b + 1000]).argmax(1) == yte[b:b + 1000]).sum().item()
    print("torch %s sps=%.0f acc=%.4f time=%.1f train_acc=%.4f first=%.3f"
          % (name, (epochs * nb - 1) * bs / t, hit / len(xte), t, train_acc, t_first - t0))


if __name__ == "__main__":
    main()
