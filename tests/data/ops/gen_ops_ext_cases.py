#!/usr/bin/python3
"""Writes ops_ext_cases.txt: reference cases for the ops added by
plugins/ops-basic/src/{math_ext,shape_ext,index_ext}.c and ops-nn's
nn_ext ops, computed here with numpy (and PyTorch where it has the op)
from MXNet's documented semantics -- an independent reference for
tests/unit/ops_basic/test_ops_ext.c and tests/unit/ops_nn/test_nn_ext.c.

Format, one item per line (values in repr-precision decimal):
  case <op> <pack> <gradmask> [k=v ...]     gradmask: inputs to check by
                                            finite differences (bit i)
  in <ndim> <dims...> | <values...>
  out <ndim> <dims...> | <values...>
  og <ndim> <dims...> | <values...>        (optional out_grad, else ones)
  igrad <ndim> <dims...> | <values...>     (optional expected input grads)
  end
Run: /usr/bin/python3 tests/data/ops/gen_ops_ext_cases.py > tests/data/ops/ops_ext_cases.txt
"""
import math
import numpy as np

rng = np.random.default_rng(20261125)
out = []


def arr_line(tag, a):
    a = np.asarray(a, dtype=np.float64)
    dims = " ".join(str(d) for d in a.shape)
    vals = " ".join(repr(float(v)) for v in a.ravel())
    return f"{tag} {a.ndim} {dims} | {vals}"


def case(op, ins, outs, grad=0, pack="ops-basic", igrad=(), og=(), **kw):
    kws = " ".join(f"{k}={str(v).replace(' ', '')}" for k, v in kw.items())
    out.append(f"case {op} {pack} {grad} {kws}".rstrip())
    for a in ins:
        out.append(arr_line("in", a))
    for a in outs:
        out.append(arr_line("out", a))
    for a in og:
        out.append(arr_line("og", a))
    for a in igrad:
        out.append(arr_line("igrad", a))
    out.append("end")


def U(lo, hi, shape):
    return rng.uniform(lo, hi, size=shape)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softplus(x):
    return np.log1p(np.exp(x))


# ------------------------------------------------------------- unary
unary = [
    ("tan", -1.2, 1.2, np.tan, 1), ("arcsin", -0.9, 0.9, np.arcsin, 1),
    ("arccos", -0.9, 0.9, np.arccos, 1), ("arctan", -3, 3, np.arctan, 1),
    ("sinh", -2, 2, np.sinh, 1), ("cosh", -2, 2, np.cosh, 1),
    ("arcsinh", -3, 3, np.arcsinh, 1), ("arccosh", 1.2, 4, np.arccosh, 1),
    ("arctanh", -0.9, 0.9, np.arctanh, 1), ("log2", 0.2, 5, np.log2, 1),
    ("log10", 0.2, 5, np.log10, 1), ("cbrt", 0.2, 5, np.cbrt, 1),
    ("rcbrt", 0.2, 5, lambda x: 1 / np.cbrt(x), 1), ("degrees", -3, 3, np.degrees, 1),
    ("radians", -200, 200, np.radians, 1), ("log_sigmoid", -4, 4, lambda x: -np.logaddexp(0, -x), 1),
    ("mish", -3, 3, lambda x: x * np.tanh(softplus(x)), 1),
    ("hard_sigmoid", -4, 4, lambda x: np.clip(0.2 * x + 0.5, 0, 1), 1),
    ("_copy", -2, 2, lambda x: x, 1), ("identity", -2, 2, lambda x: x, 1),
    ("BlockGrad", -2, 2, lambda x: x, 0), ("stop_gradient", -2, 2, lambda x: x, 0),
    ("zeros_like", -2, 2, np.zeros_like, 0), ("ones_like", -2, 2, np.ones_like, 0),
    ("trunc", -3, 3, np.trunc, 0), ("fix", -3, 3, np.fix, 0), ("rint", -3, 3, np.rint, 0),
]
for name, lo, hi, f, g in unary:
    x = U(lo, hi, (3, 4))
    if name == "hard_sigmoid":
        x[np.abs(0.2 * x + 0.5 - np.round(0.2 * x + 0.5)) < 0.02] += 0.3  # off the kinks
    case(name, [x], [f(x)], g)
x = U(-4, 4, (3, 4))
case("hard_sigmoid", [x], [np.clip(0.3 * x + 0.4, 0, 1)], 1, alpha=0.3, beta=0.4)
x = np.array([[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]])
case("logical_not", [x], [(x == 0).astype(float)])

# ------------------------------------------------------------ binary
def pymod(a, b):
    r = np.mod(a, np.where(b == 0, 1, b))
    return np.where(b == 0, 0.0, r)


binary = [
    ("hypot", np.hypot, 3), ("mod", pymod, 3),
    ("logical_and", lambda a, b: ((a != 0) & (b != 0)).astype(float), 0),
    ("logical_or", lambda a, b: ((a != 0) | (b != 0)).astype(float), 0),
    ("logical_xor", lambda a, b: ((a != 0) ^ (b != 0)).astype(float), 0),
]
for name, f, g in binary:
    if name.startswith("logical"):
        a = rng.integers(-1, 2, size=(2, 3)).astype(float)
        b = rng.integers(-1, 2, size=(2, 3)).astype(float)
        b1 = rng.integers(-1, 2, size=(1, 3)).astype(float)
    else:
        a = U(-4, 4, (2, 3))
        b = U(0.5, 2, (2, 3)) * rng.choice([-1, 1], size=(2, 3))
        b1 = U(0.5, 2, (1, 3)) * np.array([[1, -1, 1]])
    case("_" + name, [a, b], [f(a, b)], g)
    case("broadcast_" + name, [a, b1], [f(a, b1)], g)
a = np.array([[5.0, -5.0, 3.0]])
b = np.array([[0.0, 0.0, 0.0]])
case("_mod", [a, b], [np.zeros((1, 3))])

# ------------------------------------------------------------ scalar
x = U(-4, 4, (2, 3))
case("_hypot_scalar", [x], [np.hypot(x, 1.5)], 1, scalar=1.5)
case("_mod_scalar", [x], [pymod(x, np.full_like(x, -1.3))], 1, scalar=-1.3)
xr = U(0.5, 3, (2, 3)) * np.array([[1, -1, 1], [-1, 1, 1]])
case("_rmod_scalar", [xr], [pymod(np.full_like(xr, 2.5), xr)], 1, scalar=2.5)
xl = np.array([[0.0, 2.0, -1.0], [0.0, 0.5, 0.0]])
for name, f in (("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)):
    case(f"_logical_{name}_scalar", [xl], [f(xl != 0, True).astype(float)], 0, scalar=3)
    case(f"_logical_{name}_scalar", [xl], [f(xl != 0, False).astype(float)], 0, scalar=0)

# ------------------------------------------------------------ shape
x = U(-1, 1, (2, 3))
case("tile", [x], [np.tile(x, (2, 1, 3))], 1, reps="(2, 1, 3)")
y = U(-1, 1, (2, 3, 2))
case("tile", [y], [np.tile(y, (2,))], 1, reps="(2,)")
case("repeat", [x], [np.repeat(x, 2, axis=1)], 1, repeats=2, axis=1)
case("repeat", [x], [np.repeat(x, 3)], 1, repeats=3)
z = U(-1, 1, (2, 3, 4))
case("reverse", [z], [z[::-1, :, ::-1]], 1, axis="(0, 2)")
case("flip", [z], [z[:, ::-1, :]], 1, axis="1")
s = U(-1, 1, (2, 1, 3, 1))
case("squeeze", [s], [s.reshape(2, 3)], 1)
case("squeeze", [s], [s.reshape(2, 3, 1)], 1, axis="(1,)")
case("swapaxes", [z], [np.swapaxes(z, 0, 2)], 1, dim1=0, dim2=2)
case("SwapAxis", [z], [np.swapaxes(z, 1, -1)], 1, dim1=1, dim2=-1)
b = U(-1, 1, (1, 3, 1))
case("broadcast_to", [b], [np.broadcast_to(b, (2, 3, 4))], 1, shape="(2, 0, 4)")
case("broadcast_axis", [b], [np.broadcast_to(b, (2, 3, 4))], 1, axis="(0, 2)", size="(2, 4)")
case("broadcast_axes", [b], [np.broadcast_to(b, (1, 3, 5))], 1, axis="2", size="5")
r = U(-1, 1, (2, 3, 4))
case("broadcast_like", [b, r], [np.broadcast_to(b, (2, 3, 4))], 1)
l2 = U(-1, 1, (1, 3))
r2 = U(-1, 1, (5, 2))
case("broadcast_like", [l2, r2], [np.broadcast_to(l2, (5, 3))], 1, lhs_axes="(0,)", rhs_axes="(0,)")
d = U(-1, 1, (3, 4, 5))
sl = np.zeros((2, 3, 2))
case("slice_like", [d, sl], [d[:2, :3, :2]], 1)
case("slice_like", [d, sl], [d[:2, :, :2]], 1, axes="(0, 2)")
xd = U(-1, 1, (1, 8, 2, 3))
bs = 2
t = xd.reshape(1, bs, bs, 2, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(1, 2, 4, 6)
case("depth_to_space", [xd], [t], 1, block_size=2)
xs = U(-1, 1, (1, 2, 4, 6))
t = xs.reshape(1, 2, 2, bs, 3, bs).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 3)
case("space_to_depth", [xs], [t], 1, block_size=2)
case("shape_array", [z], [np.array(z.shape, dtype=float)])
case("size_array", [z], [np.array([z.size], dtype=float)])

# ------------------------------------------------------------ index
d = U(-1, 1, (3, 4))
idx = np.array([0.0, 3.0, 1.0])
case("pick", [d, idx], [d[np.arange(3), idx.astype(int)]], 1, axis=1)
idx0 = np.array([2.0, 0.0, 1.0, 2.0])
case("pick", [d, idx0.reshape(1, 4)], [d[idx0.astype(int), np.arange(4)].reshape(1, 4)], 1, axis=0, keepdims="True")
idxw = np.array([5.0, -1.0, 9.0])
case("pick", [d, idxw], [d[np.arange(3), np.mod(idxw.astype(int), 4)]], 1, axis=-1, mode="wrap")
idxc = np.array([5.0, -1.0, 2.0])
case("pick", [d, idxc], [d[np.arange(3), np.clip(idxc.astype(int), 0, 3)]], 1)
g = U(-1, 1, (3, 4, 2))
gi = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 3.0]])
case("gather_nd", [g, gi], [g[gi[0].astype(int), gi[1].astype(int)]], 1)
gi1 = np.array([[2.0, 0.0]])
case("gather_nd", [g, gi1], [g[gi1[0].astype(int)]], 1)
sd = U(-1, 1, (3, 2))
o = np.zeros((3, 4, 2))
o[gi[0].astype(int), gi[1].astype(int)] = sd
case("scatter_nd", [sd, gi], [o], 1, shape="(3, 4, 2)")
bt = U(-1, 1, (4, 3))
bi = np.array([2.0, 0.0, 1.0, 2.0])
case("batch_take", [bt, bi], [bt[np.arange(4), bi.astype(int)]], 1)
tk = U(-1, 1, (3, 5))
order = np.argsort(-tk, axis=1, kind="stable")
case("topk", [tk], [np.take_along_axis(tk, order[:, :2], 1)], 1, k=2, ret_typ="value")
case("topk", [tk], [order[:, :2].astype(float)], 0, k=2)
mask = np.zeros_like(tk)
np.put_along_axis(mask, order[:, :3], 1.0, 1)
case("topk", [tk], [mask], 0, k=3, ret_typ="mask")
asc = np.argsort(tk, axis=0, kind="stable")
case("topk", [tk], [np.take_along_axis(tk, asc[:2], 0), asc[:2].astype(float)], 1, axis=0, k=2, ret_typ="both",
     is_ascend="True")
flat = np.argsort(-tk.ravel(), kind="stable")[:4]
case("topk", [tk], [tk.ravel()[flat]], 1, axis="None", k=4, ret_typ="value")
case("sort", [tk], [np.sort(tk, axis=1)], 1)
case("sort", [tk], [-np.sort(-tk, axis=0)], 1, axis=0, is_ascend="False")
case("argsort", [tk], [np.argsort(tk, axis=1, kind="stable").astype(float)], 0)
case("argsort", [tk], [np.argsort(-tk, axis=0, kind="stable").astype(float)], 0, axis=0, is_ascend="False")
sq = U(-1, 1, (4, 3, 2))   # (T, B, R)
ln = np.array([2.0, 4.0, 1.0])
m = sq.copy()
for bb in range(3):
    m[int(ln[bb]):, bb] = -1.0
case("SequenceMask", [sq, ln], [m], 1, use_sequence_length="True", value=-1)
case("SequenceMask", [sq], [sq], 1)
sqb = U(-1, 1, (3, 4, 2))  # (B, T, R)
mb = sqb.copy()
for bb in range(3):
    mb[bb, int(ln[bb]):] = 0.0
case("SequenceMask", [sqb, ln], [mb], 1, use_sequence_length="True", axis=1)
case("SequenceLast", [sq, ln], [np.stack([sq[int(ln[bb]) - 1, bb] for bb in range(3)])], 1,
     use_sequence_length="True")
case("SequenceLast", [sq], [sq[-1]], 1)
case("SequenceLast", [sqb, ln], [np.stack([sqb[bb, int(ln[bb]) - 1] for bb in range(3)])], 1,
     use_sequence_length="True", axis=1)
rv = sq.copy()
for bb in range(3):
    L = int(ln[bb])
    rv[:L, bb] = sq[:L, bb][::-1]
case("SequenceReverse", [sq, ln], [rv], 1, use_sequence_length="True")
case("SequenceReverse", [sq], [sq[::-1]], 1)
dm = U(-1, 1, (3, 4))
case("diag", [dm], [np.diag(dm, 1)], 1, k=1)
case("diag", [dm], [np.diag(dm, -1)], 1, k=-1)
case("diag", [dm], [np.diag(dm.T, 1)], 1, k=1, axis1=1, axis2=0)
dv = U(-1, 1, (3,))
case("diag", [dv], [np.diag(dv, -1)], 1, k=-1)

# ------------------------------------------------------------ reduce_ext
r = U(-1, 1, (2, 3, 4))
rn = r.copy()
rn[0, 1, 2] = np.nan
rn[1, 0, 0] = np.nan
case("nansum", [rn], [np.nansum(rn, axis=1)], 0, axis=1)
case("nansum", [r], [np.nansum(r, axis=(0, 2), keepdims=True)], 1, axis="(0, 2)", keepdims="True")
case("nansum", [r], [np.nansum(r, axis=(0, 2))], 1, axis=1, exclude="True")
case("nanprod", [rn], [np.nanprod(rn, axis=2)], 0, axis=2)
case("nanprod", [r], [np.array([np.prod(r)])], 1)
case("moments", [r], [r.mean(axis=(0, 2)), r.var(axis=(0, 2))], 1, axes="(0, 2)")
case("moments", [r], [r.mean(axis=1, keepdims=True), r.var(axis=1, keepdims=True)], 1, axes="(1,)", keepdims="True")
case("amp_cast", [r], [r], 1, dtype="float64")
case("_contrib_div_sqrt_dim", [r], [r / 2.0], 1)
case("_contrib_arange_like", [r], [np.arange(24, dtype=float).reshape(2, 3, 4) * 0.5 + 1], 0, start=1, step=0.5)
case("_contrib_arange_like", [r], [np.array([0.0, 0.0, 2.0, 2.0])], 0, step=2, repeat=2, axis=-1)

# ------------------------------------------------------------ ops-nn
import torch
import torch.nn.functional as F

NN = "ops-nn"
x = U(-2, 2, (2, 3, 2, 2))
case("SoftmaxActivation", [x], [F.softmax(torch.tensor(x).reshape(2, -1), 1).reshape(x.shape).numpy()], 1, pack=NN)
case("SoftmaxActivation", [x], [F.softmax(torch.tensor(x), 1).numpy()], 1, pack=NN, mode="channel")
x = U(-2, 2, (2, 3, 4))
n = np.sqrt((x ** 2).sum(axis=(1, 2)) + 1e-10)
case("L2Normalization", [x], [x / n[:, None, None], n], 1, pack=NN)
n = np.sqrt((x ** 2).sum(axis=1) + 1e-6)
case("L2Normalization", [x], [x / n[:, None, :], n], 1, pack=NN, mode="channel", eps=1e-6)
n = np.sqrt((x ** 2).sum(axis=2) + 1e-10)
case("L2Normalization", [x], [x / n[:, :, None], n], 1, pack=NN, mode="spatial")
d = U(-2, 2, (4, 3))
lab = U(-1, 1, (4, 3))
case("LinearRegressionOutput", [d, lab], [d], 0, pack=NN, igrad=[(d - lab) * 2.0 / 3, np.zeros_like(lab)],
     grad_scale=2)
sg = 1 / (1 + np.exp(-d))
lab01 = rng.integers(0, 2, size=(4, 3)).astype(float)
case("LogisticRegressionOutput", [d, lab01], [sg], 0, pack=NN, igrad=[(sg - lab01) / 3])
case("MAERegressionOutput", [d, lab], [d], 0, pack=NN, igrad=[np.sign(d - lab) * 0.5 / 3], grad_scale=0.5)
d1 = U(-2, 2, (5, 1))
l1 = U(-1, 1, (5,))
case("LinearRegressionOutput", [d1, l1], [d1], 0, pack=NN, igrad=[d1 - l1[:, None]])
ml = np.array([[0.5, -1.0, 2.0], [0.0, 3.0, -0.5]])
case("MakeLoss", [ml], [ml], 0, pack=NN, igrad=[np.full_like(ml, 1.0)])
case("MakeLoss", [ml], [ml], 0, pack=NN, igrad=[np.full_like(ml, 3.0 / 2)], grad_scale=3, normalization="batch")
case("MakeLoss", [ml], [ml], 0, pack=NN, igrad=[np.full_like(ml, 1.0 / 2)], normalization="valid", valid_thresh=0.6)
c = U(-1, 1, (2, 3, 6, 7))
case("Crop", [c], [c[:, :, 1:4, 2:6]], 1, pack=NN, num_args=1, offset="(1, 2)", h_w="(3, 4)")
like = np.zeros((2, 1, 4, 3))
case("Crop", [c, like], [c[:, :, 1:5, 2:5]], 1, pack=NN, num_args=2, center_crop="True")
case("Crop", [c, like], [c[:, :, 0:4, 0:3]], 1, pack=NN, num_args=2)
p4 = U(-1, 1, (1, 2, 3, 4))
pw = ((0, 0), (0, 0), (1, 2), (2, 1))
pws = "(0,0,0,0,1,2,2,1)"
case("Pad", [p4], [np.pad(p4, pw, mode="constant", constant_values=0.5)], 1, pack=NN, mode="constant",
     pad_width=pws, constant_value=0.5)
case("Pad", [p4], [np.pad(p4, pw, mode="edge")], 1, pack=NN, mode="edge", pad_width=pws)
case("Pad", [p4], [np.pad(p4, pw, mode="reflect")], 1, pack=NN, mode="reflect", pad_width=pws)
p5 = U(-1, 1, (1, 1, 2, 3, 3))
case("pad", [p5], [np.pad(p5, ((0, 0), (0, 0), (1, 1), (0, 1), (2, 0)), mode="edge")], 1, pack=NN, mode="edge",
     pad_width="(0,0,0,0,1,1,0,1,2,0)")
xi = U(-2, 2, (2, 3, 4))
gi = U(0.5, 1.5, (3,))
bi = U(-0.5, 0.5, (3,))
t = F.instance_norm(torch.tensor(xi), weight=torch.tensor(gi), bias=torch.tensor(bi), eps=1e-3).numpy()
case("InstanceNorm", [xi, gi, bi], [t, xi.mean(axis=2), xi.var(axis=2)], 7, pack=NN)
gl = U(0.5, 1.5, (4,))
bl = U(-0.5, 0.5, (4,))
t = F.layer_norm(torch.tensor(xi), (4,), torch.tensor(gl), torch.tensor(bl), eps=1e-5).numpy()
case("LayerNorm", [xi, gl, bl], [t, xi.mean(axis=2, keepdims=True), np.sqrt(xi.var(axis=2, keepdims=True) + 1e-5)],
     7, pack=NN)
m = xi.mean(axis=1, keepdims=True)
sd = np.sqrt(xi.var(axis=1, keepdims=True) + 1e-4)
t = (xi - m) / sd * gi[None, :, None] + bi[None, :, None]
case("LayerNorm", [xi, gi, bi], [t, m, sd], 7, pack=NN, axis=1, eps=1e-4)
xg = U(-2, 2, (2, 4, 3))
gg = U(0.5, 1.5, (2,))
bg = U(-0.5, 0.5, (2,))
r = xg.reshape(2, 2, 6)
m = r.mean(axis=2)
sd = np.sqrt(r.var(axis=2) + 1e-5)
t = ((r - m[:, :, None]) / sd[:, :, None] * gg[None, :, None] + bg[None, :, None]).reshape(xg.shape)
case("GroupNorm", [xg, gg, bg], [t, m, sd], 7, pack=NN, num_groups=2)

# ------------------------------------------------------------ detection
import torchvision.ops as tvo


def corner_boxes(n):
    xy = U(0, 6, (n, 2))
    wh = U(0.5, 4, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1)


bl = corner_boxes(3)
br = corner_boxes(4)
case("_contrib_box_iou", [bl, br], [tvo.box_iou(torch.tensor(bl), torch.tensor(br)).numpy()], 0, pack=NN)
cl = np.concatenate([(bl[:, :2] + bl[:, 2:]) / 2, bl[:, 2:] - bl[:, :2]], axis=1)
cr = np.concatenate([(br[:, :2] + br[:, 2:]) / 2, br[:, 2:] - br[:, :2]], axis=1)
case("_contrib_box_iou", [cl, cr.reshape(2, 2, 4)],
     [tvo.box_iou(torch.tensor(bl), torch.tensor(br)).numpy().reshape(3, 2, 2)], 0, pack=NN, format="center")

# box_nms: rows [id, score, x1, y1, x2, y2]; torchvision's nms (per class
# with batched_nms) picks the survivors; output packs them, then -1 rows.
def nms_ref(rows, thresh, valid, topk=-1, use_id=False, force=False):
    keep_rows = [i for i in range(len(rows)) if rows[i, 1] > valid]
    keep_rows.sort(key=lambda i: -rows[i, 1])
    if topk > 0:
        keep_rows = keep_rows[:topk]
    sel = rows[keep_rows]
    boxes = torch.tensor(sel[:, 2:6])
    scores = torch.tensor(sel[:, 1])
    if use_id and not force:
        k = tvo.batched_nms(boxes, scores, torch.tensor(sel[:, 0]).long(), thresh)
    else:
        k = tvo.nms(boxes, scores, thresh)
    o = -np.ones_like(rows)
    for j, idx in enumerate(k.numpy()):
        o[j] = sel[idx]
    return o


for b in range(2):
    n = 8
    rows = np.concatenate([rng.integers(0, 2, size=(n, 1)).astype(float), U(0, 1, (n, 1)),
                           corner_boxes(n) * 0.6], axis=1)
    case("_contrib_box_nms", [rows], [nms_ref(rows, 0.3, 0.2)], 0, pack=NN, overlap_thresh=0.3, valid_thresh=0.2)
    case("_contrib_box_nms", [rows.reshape(1, n, 6)], [nms_ref(rows, 0.3, 0.0, topk=5, use_id=True).reshape(1, n, 6)], 0,
         pack=NN, overlap_thresh=0.3, topk=5, id_index=0)
    case("_contrib_box_nms", [rows], [nms_ref(rows, 0.3, 0.0, use_id=True, force=True)], 0, pack=NN,
         overlap_thresh=0.3, id_index=0, force_suppress="True")
og = U(-1, 1, (8, 6))
ref = nms_ref(rows, 0.3, 0.0)
ig = np.zeros_like(rows)
for j in range(8):
    if ref[j, 0] != -1 or ref[j, 1] != -1:
        src = [i for i in range(8) if np.array_equal(rows[i], ref[j])][0]
        ig[src] += og[j]
case("_contrib_box_nms", [rows], [ref], 0, pack=NN, og=[og], igrad=[ig], overlap_thresh=0.3)


def prior_ref(H, W, sizes, ratios, steps=(-1, -1), offsets=(0.5, 0.5), clip=False):
    sy = steps[0] if steps[0] > 0 else 1.0 / H
    sx = steps[1] if steps[1] > 0 else 1.0 / W
    o = []
    for r in range(H):
        for c in range(W):
            cy, cx = (r + offsets[0]) * sy, (c + offsets[1]) * sx
            for s in sizes:
                w, h = s * H / W / 2, s / 2
                o.append([cx - w, cy - h, cx + w, cy + h])
            for rt in ratios[1:]:
                q = math.sqrt(rt)
                w, h = sizes[0] * H / W * q / 2, sizes[0] / q / 2
                o.append([cx - w, cy - h, cx + w, cy + h])
    o = np.array(o)[None]
    return np.clip(o, 0, 1) if clip else o


fm = np.zeros((1, 3, 2, 3))
case("MultiBoxPrior", [fm], [prior_ref(2, 3, [0.5, 0.25], [1, 2, 0.5])], 0, pack=NN, sizes="(0.5,0.25)",
     ratios="[1,2,0.5]")
case("_contrib_MultiBoxPrior", [fm], [prior_ref(2, 3, [0.7], [1, 3], (0.4, 0.3), (0.25, 0.75), True)], 0, pack=NN,
     sizes="0.7", ratios="(1,3)", steps="(0.4,0.3)", offsets="(0.25,0.75)", clip="True")

feat = U(-1, 1, (2, 3, 7, 8))
rois = np.array([[0, 0.0, 0.0, 12.0, 10.0], [1, 4.0, 2.0, 15.0, 13.0], [0, 6.3, 3.2, 9.1, 8.8]])
case("ROIPooling", [feat, rois], [tvo.roi_pool(torch.tensor(feat), torch.tensor(rois), (3, 2), 0.5).numpy()], 1,
     pack=NN, pooled_size="(3, 2)", spatial_scale=0.5)
for aligned, sr in ((False, 2), (False, -1), (True, 2)):
    t = tvo.roi_align(torch.tensor(feat), torch.tensor(rois), (2, 3), 0.5, sr, aligned).numpy()
    case("_contrib_ROIAlign", [feat, rois], [t], 1, pack=NN, pooled_size="(2, 3)", spatial_scale=0.5,
         sample_ratio=sr, aligned=str(aligned))


# Spatial transformer family (MXNet's layouts: grids are (N, 2, H, W), x first), against PyTorch's
# affine_grid / grid_sample with align_corners=True and zero padding, gradients by autograd.
def nchw_grid(g):  # (N, H, W, 2) -> (N, 2, H, W)
    return np.transpose(g, (0, 3, 1, 2))


theta = U(-0.9, 0.9, (2, 6))
tt = torch.tensor(theta, requires_grad=True)
g = F.affine_grid(tt.view(2, 2, 3), (2, 1, 4, 5), align_corners=True)
og = U(-1, 1, (2, 2, 4, 5))
g.backward(torch.tensor(np.transpose(og, (0, 2, 3, 1))))
case("GridGenerator", [theta], [nchw_grid(g.detach().numpy())], 1, pack=NN, og=[og], igrad=[tt.grad.numpy()],
     transform_type="affine", target_shape="(4, 5)")
flow = U(-1.5, 1.5, (2, 2, 3, 4))
H, W = 3, 4
ys, xs = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
wg = np.stack([(flow[:, 0] + xs) * 2 / (W - 1) - 1, (flow[:, 1] + ys) * 2 / (H - 1) - 1], 1)
case("GridGenerator", [flow], [wg], 1, pack=NN, transform_type="warp")

img = U(-1, 1, (2, 3, 5, 6))
grid = U(-1.15, 1.15, (2, 2, 4, 3))  # some points fall outside: zero padding
ti = torch.tensor(img, requires_grad=True)
tg = torch.tensor(grid, requires_grad=True)
o = F.grid_sample(ti, tg.permute(0, 2, 3, 1), mode="bilinear", padding_mode="zeros", align_corners=True)
og = U(-1, 1, tuple(o.shape))
o.backward(torch.tensor(og))
case("BilinearSampler", [img, grid], [o.detach().numpy()], 1, pack=NN, og=[og], igrad=[ti.grad.numpy(), tg.grad.numpy()])

loc = np.array([[0.8, 0.1, 0.05, -0.15, 0.9, 0.1], [1.1, -0.2, -0.1, 0.25, 0.7, 0.05]]) + U(-0.05, 0.05, (2, 6))
ti = torch.tensor(img, requires_grad=True)
tl = torch.tensor(loc, requires_grad=True)
g = F.affine_grid(tl.view(2, 2, 3), (2, 3, 4, 4), align_corners=True)
o = F.grid_sample(ti, g, mode="bilinear", padding_mode="zeros", align_corners=True)
og = U(-1, 1, tuple(o.shape))
o.backward(torch.tensor(og))
case("SpatialTransformer", [img, loc], [o.detach().numpy()], 1, pack=NN, og=[og], igrad=[ti.grad.numpy(), tl.grad.numpy()],
     target_shape="(4, 4)", transform_type="affine", sampler_type="bilinear")

print("# generated by gen_ops_ext_cases.py (numpy " + np.__version__ + "); do not edit")
print("\n".join(out))
