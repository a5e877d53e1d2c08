#!/usr/bin/python3
"""Writes detect_cases.txt: reference cases for ops-nn's SSD heads
(multibox.c: MultiBoxTarget, MultiBoxDetection) and CTCLoss (ctc_loss.c),
for tests/unit/ops_nn/test_detect_heads.c.

MultiBoxTarget / MultiBoxDetection: an independent float64 numpy
implementation below, written from MXNet 1.x's documented rules
(src/operator/contrib/multibox_target.cc, multibox_detection.cc; see the
comment at the top of plugins/ops-nn/src/multibox.c for the two points
where MXNet's CPU and GPU code disagree).  Every case is also run on its
inputs rounded to float32 and must give the same answer there, so the
test's float32 pass cannot flip a threshold or a tie.

CTCLoss: PyTorch's torch.nn.functional.ctc_loss (reduction='none',
zero_infinity=True, which is MXNet's rule for labels that cannot fit) on
log_softmax of the activations, blank 0 or C-1; the input gradient from
autograd for a random out_grad.

Same line format as gen_ops_ext_cases.py (case / in / out / og / igrad /
end).  Run:
  /usr/bin/python3 tests/data/ops/gen_detect_cases.py > tests/data/ops/detect_cases.txt
"""
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261125)
out = []
NN = "ops-nn"


def arr_line(tag, a):
    a = np.asarray(a, dtype=np.float64)
    dims = " ".join(str(d) for d in a.shape)
    vals = " ".join(repr(float(v)) for v in a.ravel())
    return f"{tag} {a.ndim} {dims} | {vals}"


def case(op, ins, outs, grad=0, igrad=(), og=(), **kw):
    kws = " ".join(f"{k}={str(v).replace(' ', '')}" for k, v in kw.items())
    out.append(f"case {op} {NN} {grad} {kws}".rstrip())
    for tag, arrs in (("in", ins), ("out", outs), ("og", og), ("igrad", igrad)):
        for a in arrs:
            out.append(arr_line(tag, a))
    out.append("end")


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    ok = np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
    assert ok, f"{what}: float32-rounded inputs change the answer"


# ------------------------------------------------------------------ boxes
def iou_matrix(a, b):
    """IoU of every box of a (n, 4) with every box of b (m, 4), corner format."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def multibox_target(anchor, label, cls_pred, overlap_threshold=0.5, ignore_label=-1.0,
                    negative_mining_ratio=-1.0, negative_mining_thresh=0.5,
                    minimum_negative_samples=0, variances=(0.1, 0.1, 0.2, 0.2)):
    anc = anchor.reshape(-1, 4)
    A = anc.shape[0]
    B = label.shape[0]
    loc = np.zeros((B, A, 4))
    mask = np.zeros((B, A, 4))
    cls = np.full((B, A), float(ignore_label))
    for b in range(B):
        rows = label[b]
        pad = np.nonzero(rows[:, 0] == -1)[0]
        G = int(pad[0]) if len(pad) else rows.shape[0]
        if G == 0:
            continue
        gt = rows[:G]
        ov = iou_matrix(anc, gt[:, 1:5])           # (A, G)
        match = np.full(A, -1)
        state = np.full(A, -1)                     # 1 pos, 0 neg, -1 ignore
        # bipartite: best remaining pair, first in (anchor, label) order on ties
        free_a = np.ones(A, bool)
        free_g = np.ones(G, bool)
        for _ in range(G):
            m = np.where(free_a[:, None] & free_g[None, :], ov, -np.inf)
            best = m.max()
            if not best > 1e-6:
                break
            j, k = np.argwhere(m == best)[0]       # row-major: smallest anchor, then label
            match[j], state[j] = k, 1
            free_a[j], free_g[k] = False, False
        best_gt = ov.argmax(axis=1)                # first maximum on ties
        best_iou = ov.max(axis=1)
        if overlap_threshold > 0:
            hit = (state != 1) & (best_iou > overlap_threshold)
            match[hit], state[hit] = best_gt[hit], 1
        npos = int((state == 1).sum())
        if negative_mining_ratio > 0:
            nneg = max(int(npos * negative_mining_ratio), minimum_negative_samples)
            nneg = min(nneg, A - npos)
            if nneg > 0:
                logits = cls_pred[b]               # (C, A)
                p = np.exp(logits - logits.max(axis=0))
                bg = p[0] / p.sum(axis=0)
                cand = [j for j in range(A) if state[j] == -1 and best_iou[j] < negative_mining_thresh]
                cand.sort(key=lambda j: (bg[j], j))  # least background first, stable
                state[cand[:nneg]] = 0
        else:
            state[state != 1] = 0
        for j in range(A):
            if state[j] == 1:
                g = gt[match[j]]
                cls[b, j] = g[0] + 1
                mask[b, j] = 1
                aw, ah = anc[j, 2] - anc[j, 0], anc[j, 3] - anc[j, 1]
                ax, ay = (anc[j, 0] + anc[j, 2]) / 2, (anc[j, 1] + anc[j, 3]) / 2
                gw, gh = g[3] - g[1], g[4] - g[2]
                gx, gy = (g[1] + g[3]) / 2, (g[2] + g[4]) / 2
                loc[b, j] = [(gx - ax) / aw / variances[0], (gy - ay) / ah / variances[1],
                             np.log(gw / aw) / variances[2], np.log(gh / ah) / variances[3]]
            elif state[j] == 0:
                cls[b, j] = 0
    return loc.reshape(B, -1), mask.reshape(B, -1), cls


def multibox_detection(cls_prob, loc_pred, anchor, clip=True, threshold=0.01, nms_threshold=0.5,
                       force_suppress=False, variances=(0.1, 0.1, 0.2, 0.2), nms_topk=-1):
    B, C, A = cls_prob.shape
    anc = anchor.reshape(-1, 4)[:A]
    res = np.full((B, A, 6), -1.0)
    for b in range(B):
        fg = cls_prob[b, 1:]                                  # (C-1, A)
        if C > 1:
            cid = fg.argmax(axis=0) + 1                       # first best class
            score = fg.max(axis=0)
        else:
            cid, score = np.zeros(A, int), np.full(A, -1.0)
        cid = np.where(score < threshold, 0, cid)
        lp = loc_pred[b].reshape(A, 4)
        aw, ah = anc[:, 2] - anc[:, 0], anc[:, 3] - anc[:, 1]
        ax, ay = (anc[:, 0] + anc[:, 2]) / 2, (anc[:, 1] + anc[:, 3]) / 2
        ox, oy = lp[:, 0] * variances[0] * aw + ax, lp[:, 1] * variances[1] * ah + ay
        ow, oh = np.exp(lp[:, 2] * variances[2]) * aw / 2, np.exp(lp[:, 3] * variances[3]) * ah / 2
        boxes = np.stack([ox - ow, oy - oh, ox + ow, oy + oh], 1)
        if clip:
            boxes = np.clip(boxes, 0, 1)
        rows = np.concatenate([(cid - 1)[:, None], score[:, None], boxes], 1)
        valid = rows[rows[:, 0] >= 0]
        V = len(valid)
        res[b, :V] = valid
        if V < 1 or nms_threshold <= 0 or nms_threshold > 1:
            continue
        order = sorted(range(V), key=lambda i: (-valid[i, 1], i))
        keep = V if not (0 < nms_topk < V) else nms_topk
        res[b, keep:V, 0] = -1                                # rows past topk keep their old contents
        res[b, :keep] = valid[order[:keep]]
        for i in range(keep):
            if res[b, i, 0] < 0:
                continue
            for j in range(i + 1, keep):
                if res[b, j, 0] < 0:
                    continue
                if force_suppress or res[b, i, 0] == res[b, j, 0]:
                    if iou_matrix(res[b, i:i + 1, 2:], res[b, j:j + 1, 2:])[0, 0] >= nms_threshold:
                        res[b, j, 0] = -1
    return res


def target_case(anchor, label, cls_pred, **kw):
    ref = multibox_target(anchor, label, cls_pred, **kw)
    for r, r32 in zip(ref, multibox_target(f32(anchor), f32(label), f32(cls_pred), **kw)):
        same(r, r32, "MultiBoxTarget")
    args = {k: (str(v) if not isinstance(v, tuple) else "(" + ",".join(map(str, v)) + ")") for k, v in kw.items()}
    case("MultiBoxTarget", [anchor, label, cls_pred], list(ref), 0, **args)
    return ref


def detection_case(cls_prob, loc_pred, anchor, name="MultiBoxDetection", **kw):
    ref = multibox_detection(cls_prob, loc_pred, anchor, **kw)
    same(ref, multibox_detection(f32(cls_prob), f32(loc_pred), f32(anchor), **kw), "MultiBoxDetection")
    args = {k: (str(v) if not isinstance(v, tuple) else "(" + ",".join(map(str, v)) + ")") for k, v in kw.items()}
    case(name, [cls_prob, loc_pred, anchor], [ref], 0, **args)
    return ref


def grid_anchors(n, sizes):
    """MultiBoxPrior-like anchors on an n x n grid, several square sizes per cell."""
    a = []
    for r in range(n):
        for c in range(n):
            cy, cx = (r + 0.5) / n, (c + 0.5) / n
            for s in sizes:
                a.append([cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2])
    return np.array(a)[None]


# --------------------------------------------------------- MultiBoxTarget
anc = grid_anchors(3, [0.3, 0.55])                     # (1, 18, 4)
A = anc.shape[1]
lab = np.array([
    [[0, 0.05, 0.1, 0.38, 0.4], [2, 0.5, 0.45, 0.98, 0.9], [1, 0.3, 0.62, 0.62, 0.95], [-1, -1, -1, -1, -1]],
    [[1, 0.35, 0.3, 0.7, 0.72], [-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]],
    [[-1, -1, -1, -1, -1]] * 4,                        # no object: every anchor ignored
])
C = 4
cp = rng.normal(0, 1.5, size=(3, C, A))
r = target_case(anc, lab, cp)                          # defaults: all other anchors negative
assert (r[2][0] > 0).sum() >= 3 and (r[2][2] == -1).all()
r = target_case(anc, lab, cp, negative_mining_ratio=2.0, ignore_label=-2.0)
assert (r[2] == -2).any() and (r[2] == 0).any()
r = target_case(anc, lab, cp, negative_mining_ratio=1.0, minimum_negative_samples=5, negative_mining_thresh=0.4,
                variances=(0.2, 0.2, 0.3, 0.3))
assert ((r[2][1] == 0).sum() == 5)
r = target_case(anc, lab, cp, overlap_threshold=0.0, negative_mining_ratio=3.0)   # bipartite only
assert ((r[2][0] > 0).sum() == 3)
target_case(anc, lab, cp, overlap_threshold=0.25, negative_mining_ratio=1.5, negative_mining_thresh=0.3,
            ignore_label=-1.0)

# Ties (dyadic coordinates, so every IoU is exact in float32 too):
# duplicated anchors 0 and 1 (the first wins the bipartite match), a label
# box at IoU 0.6 from anchors 2, 3 and 4 (anchor 2 wins), an anchor at IoU
# 0.5 from two labels (the first one's class), equal background
# scores (lower index first in mining), and a label width of 6 (an extra
# column, ignored).
anc_t = np.array([[[0.125, 0.125, 0.5, 0.5], [0.125, 0.125, 0.5, 0.5], [0.5, 0.5, 0.875, 0.875],
                   [0.375, 0.5, 0.75, 0.875], [0.625, 0.5, 1.0, 0.875], [0.0, 0.625, 0.25, 0.875],
                   [0.625, 0.0, 0.875, 0.25], [0.25, 0.25, 0.625, 0.625]]])
At = anc_t.shape[1]
lab_t = np.array([[[3, 0.125, 0.125, 0.5, 0.5, 7], [1, 0.5, 0.5, 0.875, 0.875, 7], [-1, -1, -1, -1, -1, -1]],
                  [[0, 0.375, 0.5, 1.0, 0.875, 9], [-1, -1, -1, -1, -1, -1], [-1, -1, -1, -1, -1, -1]],
                  [[2, 0.375, 0.5, 0.75, 0.875, 5], [0, 0.625, 0.5, 1.0, 0.875, 5], [-1, -1, -1, -1, -1, -1]]])
cp_t = rng.normal(0, 1, size=(3, 3, At))
cp_t[:, :, 6] = cp_t[:, :, 5]                          # equal background probability
cp_t[:, :, 7] = cp_t[:, :, 5]
r = target_case(anc_t, lab_t, cp_t, overlap_threshold=0.0, negative_mining_ratio=1.0, negative_mining_thresh=0.5)
assert list(r[2][0, :3]) != [4, 4, 2] and r[2][0, 0] == 4 and r[2][0, 1] != 4 and r[2][1, 2] == 1
assert r[2][1, 3] != 1 and r[2][1, 4] != 1
r = target_case(anc_t, lab_t, cp_t, overlap_threshold=0.5, negative_mining_ratio=0.5, negative_mining_thresh=0.2)
assert r[2][0, 1] == 4 and list(r[2][1, 2:5]) == [1, 1, 1]
target_case(anc_t, lab_t, cp_t, negative_mining_ratio=2.0, negative_mining_thresh=0.7)
# batch 2: anchor 2 has IoU 0.5 with both labels; the first label's class wins
r = target_case(anc_t, lab_t, cp_t, overlap_threshold=0.4)
assert r[2][2, 2] == 3 and r[2][2, 3] == 3 and r[2][2, 4] == 1

# ------------------------------------------------------ MultiBoxDetection
anc_d = grid_anchors(3, [0.3, 0.4])                    # overlapping pairs per cell
Ad = anc_d.shape[1]
logits = rng.normal(0, 1.2, size=(2, 4, Ad))
prob = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
locp = rng.normal(0, 0.6, size=(2, 4 * Ad))
detection_case(prob, locp, anc_d, threshold=0.3)
detection_case(prob, locp, anc_d, name="_contrib_MultiBoxDetection", threshold=0.2, force_suppress=True,
               nms_topk=4, clip=False, nms_threshold=0.3, variances=(0.2, 0.2, 0.1, 0.1))
prob_t = prob.copy()
prob_t[:, :, 3] = prob_t[:, :, 1]                      # equal scores: anchor order kept
prob_t[:, :, 7] = prob_t[:, :, 1]
detection_case(prob_t, locp, anc_d, nms_threshold=0.0)
detection_case(prob_t, locp, anc_d, nms_threshold=0.45, threshold=0.01)
detection_case(prob, locp, anc_d, threshold=0.99)      # nothing passes: all -1
detection_case(prob[:, :1], locp, anc_d)               # background only: all -1


# --------------------------------------------------------------- CTCLoss
def ctc_case(T, N, Cc, labels, blank_last=False, data_len=None, label_len=None, name="CTCLoss"):
    x = rng.normal(0, 1.0, size=(T, N, Cc))
    blank = Cc - 1 if blank_last else 0
    pad = -1 if blank_last else 0
    lab = np.full((N, max(len(l) for l in labels)), float(pad))
    for n, l in enumerate(labels):
        lab[n, :len(l)] = l
    tl = [len(l) for l in labels]
    if label_len is not None:                        # values past the length are junk, not padding
        for n in range(N):
            lab[n, label_len[n]:] = (blank + 1) % Cc if blank == 0 else 0
        tl = label_len
    il = data_len if data_len is not None else [T] * N
    xt = torch.tensor(x, requires_grad=True)
    tgt = torch.tensor(np.concatenate([np.asarray(labels[n][:tl[n]], dtype=np.int64) for n in range(N)]))
    loss = F.ctc_loss(F.log_softmax(xt, dim=2), tgt, torch.tensor(il), torch.tensor(tl), blank=blank,
                      reduction="none", zero_infinity=True)
    og = rng.uniform(0.5, 1.5, size=(N,))
    loss.backward(torch.tensor(og))
    ins = [x, lab]
    kw = {}
    if blank_last:
        kw["blank_label"] = "last"
    if data_len is not None:
        ins.append(np.array(data_len, dtype=float))
        kw["use_data_lengths"] = "True"
    if label_len is not None:
        ins.append(np.array(label_len, dtype=float))
        kw["use_label_lengths"] = "True"
    case(name, ins, [loss.detach().numpy()], 1, og=[og], igrad=[xt.grad.numpy()], **kw)
    return loss.detach().numpy()


ctc_case(6, 3, 5, [[1, 2, 3], [4, 4], [2]])                              # blank first, 0-padded
ctc_case(7, 3, 4, [[0, 0, 1], [2, 1, 0, 2], []], blank_last=True, name="ctc_loss")  # repeats, empty label
loss = ctc_case(8, 4, 5, [[1, 1, 2], [3, 2, 1, 4], [2, 2], [1]], data_len=[8, 5, 3, 1],
                label_len=[3, 3, 2, 1], name="_contrib_CTCLoss")
assert loss[2] > 0                                                       # "2 2" fits 3 frames: 2 _ 2
loss = ctc_case(5, 2, 6, [[0, 4, 4], [3]], blank_last=True, data_len=[3, 5], label_len=[3, 1])
assert loss[0] == 0                                                      # "0 4 4" needs 4 frames: loss 0

print("# generated by gen_detect_cases.py (numpy " + np.__version__ + ", torch " + torch.__version__ + "); do not edit")
print("\n".join(out))
