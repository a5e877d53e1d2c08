#!/usr/bin/python3
"""Writes rnn_cases.txt: reference cases for ops-nn's fused RNN op
(plugins/ops-nn/src/rnn.c), computed with PyTorch's torch.nn.LSTM / GRU /
RNN in float64 -- an independent reference for tests/unit/ops_nn/test_rnn.c.

PyTorch's per-layer weights are packed into MXNet's flat `parameters`
vector here (MXNet rnn-inl.h): all weights first -- for each layer, for
each direction (forward, then reverse): weight_ih (G*H, I) then weight_hh
(G*H, H) -- then all biases in the same order, bias_ih then bias_hh.
PyTorch's gate order (LSTM i,f,g,o; GRU r,z,n with r applied to
(W_hn h + b_hn)) is cuDNN's and MXNet's, so no reordering is needed.
Initial states (L*D, N, H) are ordered layer-major, direction-minor in all
three.

Format: as gen_ops_ext_cases.py (case/in/out/og/igrad/end lines); the
og/igrad lines give the out_grads and PyTorch's input gradients (data,
parameters, state, state_cell).
Run: /usr/bin/python3 tests/data/ops/gen_rnn_cases.py > tests/data/ops/rnn_cases.txt
"""
import numpy as np
import torch

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(20261125)
out = []


def arr_line(tag, a):
    a = np.asarray(a, dtype=np.float64)
    dims = " ".join(str(d) for d in a.shape)
    vals = " ".join(repr(float(v)) for v in a.ravel())
    return f"{tag} {a.ndim} {dims} | {vals}"


def make_module(mode, C, H, L, bidir):
    kw = dict(input_size=C, hidden_size=H, num_layers=L, bidirectional=bidir)
    if mode == "lstm":
        return torch.nn.LSTM(**kw)
    if mode == "gru":
        return torch.nn.GRU(**kw)
    return torch.nn.RNN(nonlinearity="relu" if mode == "rnn_relu" else "tanh", **kw)


def packed(m, L, D):
    sfx = ["", "_reverse"][:D]
    ws, bs = [], []
    for l in range(L):
        for s in sfx:
            ws += [getattr(m, f"weight_ih_l{l}{s}"), getattr(m, f"weight_hh_l{l}{s}")]
            bs += [getattr(m, f"bias_ih_l{l}{s}"), getattr(m, f"bias_hh_l{l}{s}")]
    return torch.cat([t.reshape(-1) for t in ws + bs])


def case(mode, T, N, C, H, L, bidir, state_outputs, grads=True):
    D = 2 if bidir else 1
    m = make_module(mode, C, H, L, bidir)
    with torch.no_grad():
        for prm in m.parameters():
            prm.copy_(torch.from_numpy(rng.uniform(-0.6, 0.6, size=tuple(prm.shape))))
    x = torch.from_numpy(rng.uniform(-1, 1, size=(T, N, C))).requires_grad_()
    h0 = torch.from_numpy(rng.uniform(-0.5, 0.5, size=(L * D, N, H))).requires_grad_()
    c0 = torch.from_numpy(rng.uniform(-0.5, 0.5, size=(L * D, N, H))).requires_grad_()
    if mode == "lstm":
        y, (hy, cy) = m(x, (h0, c0))
        outs = [y, hy, cy] if state_outputs else [y]
    else:
        y, hy = m(x, h0)
        outs = [y, hy] if state_outputs else [y]
    w = packed(m, L, D)
    ins = [x, w, h0] + ([c0] if mode == "lstm" else [])
    mask = (1 << len(ins)) - 1 if grads else 0
    kws = f"mode={mode} state_size={H} num_layers={L} bidirectional={bidir} state_outputs={state_outputs}"
    out.append(f"case RNN ops-nn {mask} {kws}")
    for a in ins:
        out.append(arr_line("in", a.detach().numpy()))
    for a in outs:
        out.append(arr_line("out", a.detach().numpy()))
    ogs = [torch.from_numpy(rng.uniform(-1, 1, size=tuple(o.shape))) for o in outs]
    m.zero_grad()
    torch.autograd.backward(outs, ogs)
    wgrad = packed_grad(m, L, D)
    for o in ogs:
        out.append(arr_line("og", o.numpy()))
    igr = [x.grad, wgrad, h0.grad] + ([c0.grad] if mode == "lstm" else [])
    for g in igr:
        out.append(arr_line("igrad", g.numpy()))
    out.append("end")


def packed_grad(m, L, D):
    sfx = ["", "_reverse"][:D]
    ws, bs = [], []
    for l in range(L):
        for s in sfx:
            ws += [getattr(m, f"weight_ih_l{l}{s}").grad, getattr(m, f"weight_hh_l{l}{s}").grad]
            bs += [getattr(m, f"bias_ih_l{l}{s}").grad, getattr(m, f"bias_hh_l{l}{s}").grad]
    return torch.cat([t.reshape(-1) for t in ws + bs])


#    mode        T  N  C  H  L  bidir  state_outputs
case("lstm",     3, 2, 3, 2, 1, False, False)
case("lstm",     3, 2, 3, 2, 2, True,  True)
case("lstm",     1, 1, 2, 3, 1, True,  True)
case("gru",      3, 2, 3, 2, 2, True,  True)
case("gru",      4, 2, 2, 3, 1, False, False)
case("rnn_tanh", 3, 2, 3, 2, 2, False, True)
case("rnn_relu", 3, 2, 3, 2, 2, True,  True)
case("rnn_relu", 2, 3, 2, 2, 1, False, False)
print("\n".join(out))
