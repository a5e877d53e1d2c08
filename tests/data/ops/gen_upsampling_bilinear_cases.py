#!/usr/bin/python3
"""Writes upsampling_bilinear_cases.txt: reference cases for UpSampling
with sample_type='bilinear' (plugins/ops-nn/src/upsampling_bilinear.c),
computed with PyTorch from MXNet's definition of the op: a depthwise
transposed convolution (torch.nn.functional.conv_transpose2d, groups = C)
with kernel 2*s - s%2, stride s, padding ceil((s-1)/2), no bias, the weight
(C, 1, k, k) being the op's second input.  Also MXNet's own documented
example (ones data, ones weight, scale 2), checked here against torch.
Same format as gen_ops_ext_cases.py (see its docstring); read by
tests/unit/ops_nn/test_upsampling_bilinear.c.
Run: /usr/bin/python3 tests/data/ops/gen_upsampling_bilinear_cases.py > tests/data/ops/upsampling_bilinear_cases.txt
"""
import math
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261125)
out = []


def arr_line(tag, a):
    a = np.asarray(a, dtype=np.float64)
    dims = " ".join(str(d) for d in a.shape)
    vals = " ".join(repr(float(v)) for v in a.ravel())
    return f"{tag} {a.ndim} {dims} | {vals}"


def bilinear_weight(C, k):
    """mx.init.Bilinear's filler (the Caffe one): f = ceil(k/2),
    c = (2f - 1 - f%2) / (2f), w[y][x] = (1-|x/f-c|)(1-|y/f-c|)."""
    f = math.ceil(k / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    w = np.zeros((k, k))
    for y in range(k):
        for x in range(k):
            w[y, x] = (1 - abs(x / f - c)) * (1 - abs(y / f - c))
    return np.broadcast_to(w, (C, 1, k, k)).copy()


def upsample(x, w, s):
    k = 2 * s - s % 2
    p = math.ceil((s - 1) / 2.0)
    C = x.shape[1]
    assert w.shape == (C, 1, k, k)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    y = F.conv_transpose2d(tx, tw, stride=s, padding=p, groups=C)
    assert y.shape[2] == x.shape[2] * s and y.shape[3] == x.shape[3] * s
    og = rng.uniform(-1, 1, size=tuple(y.shape))
    y.backward(torch.tensor(og))
    return y.detach().numpy(), og, tx.grad.numpy(), tw.grad.numpy()


def case(x, w, s, mask=3):
    y, og, gx, gw = upsample(x, w, s)
    C = x.shape[1]
    out.append(f"case UpSampling ops-nn {mask} scale={s} sample_type=bilinear num_filter={C} num_args=2")
    out.append(arr_line("in", x))
    out.append(arr_line("in", w))
    out.append(arr_line("out", y))
    out.append(arr_line("og", og))
    out.append(arr_line("igrad", gx))
    out.append(arr_line("igrad", gw))
    out.append("end")


# MXNet's documented example: UpSampling(x, w, scale=2, sample_type='bilinear', num_filter=1)
doc_y = np.array([[1, 2, 2, 2, 2, 1], [2, 4, 4, 4, 4, 2], [2, 4, 4, 4, 4, 2],
                  [2, 4, 4, 4, 4, 2], [2, 4, 4, 4, 4, 2], [1, 2, 2, 2, 2, 1]], dtype=np.float64)
y, _, _, _ = upsample(np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 4)), 2)
assert np.array_equal(y[0, 0], doc_y), y
case(np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 4)), 2, mask=0)

# random data, bilinear-initialised and random weights, scales 2, 3, 4
for (N, C, H, W, s, init) in [(2, 3, 4, 5, 2, "bilinear"), (1, 2, 3, 4, 3, "random"),
                              (1, 2, 3, 3, 4, "bilinear"), (2, 1, 2, 3, 2, "random")]:
    k = 2 * s - s % 2
    x = rng.uniform(-1, 1, size=(N, C, H, W))
    w = bilinear_weight(C, k) if init == "bilinear" else rng.uniform(-1, 1, size=(C, 1, k, k))
    case(x, w, s)

print("\n".join(out))
