#!/usr/bin/python3
"""Writes the fused-RNN language-model fixtures for
tests/unit/executor/test_rnn_lm.c, independently of mxplug:

- fused_rnn_lm-symbol.json: the symbol as MXNet 1.9 saves a FusedRNNCell
  language model (nnvm JSON: nodes / arg_nodes / node_row_ptr / heads /
  attrs, string-valued op attrs): data (T, N) token ids -> Embedding
  `embed` -> RNN `lstm_rnn` (mode lstm, 2 layers, state_size 6, inputs
  embed, lstm_parameters, lstm_begin_state_0, lstm_begin_state_1) ->
  Reshape (-1, 6) -> FullyConnected `pred` -> SoftmaxOutput `softmax`.
- fused_rnn_lm-0000.params: arg:embed_weight, arg:lstm_parameters,
  arg:pred_weight, arg:pred_bias as MXNet's NDArray list file (V2 records,
  written with struct as tests/data/ndarray/make_params.py does);
  lstm_parameters in MXNet's packed layout (all weights, then all biases;
  per layer i2h then h2h; gates i, f, g, o).
- gluon_rnn_lm-symbol.json, gluon_rnn_lm-0000.params: the same model as
  Gluon's HybridBlock.export writes an rnn.LSTM layer (MXNet 1.9
  gluon/rnn/rnn_layer.py): per-layer variables lstm0_l{l}_{i2h,h2h}_{weight,
  bias} with __shape__, each Reshape'd to (-1,), joined by
  _rnn_param_concat (dim 0) into the RNN's parameters, RNN with every
  attribute Gluon writes (state_outputs True, projection_size None, ...);
  states as inputs data1/data2; SoftmaxOutput added on top for training.
  Same weights, so the same reference applies.
- fused_rnn_lm_ref.txt: the batch (data, softmax_label), PyTorch's softmax
  output, and the gradients SoftmaxOutput's backward gives (d logits =
  p - onehot(label)) of lstm_parameters and embed_weight, all float64:
    <name> <n> | v0 v1 ...
Run: /usr/bin/python3 tests/data/symbol/gen_fused_rnn_lm.py
"""
import json
import os
import struct

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
T, N, V, E, H, L = 5, 2, 12, 4, 6, 2
rng = np.random.default_rng(1709)


def node(op, name, inputs=(), attrs=None):
    n = {"op": op, "name": name, "inputs": [[i, 0, 0] for i in inputs]}
    if attrs:
        n["attrs"] = dict(sorted(attrs.items()))
    return n


def symbol_json():
    nodes = [
        node("null", "data"),
        node("null", "embed_weight"),
        node("Embedding", "embed", [0, 1], {"input_dim": str(V), "output_dim": str(E)}),
        node("null", "lstm_parameters"),
        node("null", "lstm_begin_state_0"),
        node("null", "lstm_begin_state_1"),
        node("RNN", "lstm_rnn", [2, 3, 4, 5],
             {"bidirectional": "False", "mode": "lstm", "num_layers": str(L), "p": "0.0",
              "state_outputs": "False", "state_size": str(H)}),
        node("Reshape", "reshape0", [6], {"shape": "(-1, %d)" % H}),
        node("null", "pred_weight"),
        node("null", "pred_bias"),
        node("FullyConnected", "pred", [7, 8, 9], {"num_hidden": str(V)}),
        node("null", "softmax_label"),
        node("SoftmaxOutput", "softmax", [10, 11]),
    ]
    args = [i for i, n in enumerate(nodes) if n["op"] == "null"]
    return {"nodes": nodes, "arg_nodes": args, "node_row_ptr": list(range(len(nodes) + 1)),
            "heads": [[12, 0, 0]], "attrs": {"mxnet_version": ["int", 10900]}}


def gluon_symbol_json():
    nodes = [node("null", "data0"), node("null", "embedding0_weight", attrs={"__shape__": "(%d, %d)" % (V, E)}),
             node("Embedding", "embedding0_fwd", [0, 1], {"input_dim": str(V), "output_dim": str(E), "dtype": "float32",
                                                          "sparse_grad": "False"})]
    pieces = []
    for t in ("weight", "bias"):
        for l in range(L):
            for g in ("i2h", "h2h"):
                name = "lstm0_l%d_%s_%s" % (l, g, t)
                cols = (E if l == 0 else H) if g == "i2h" else H
                shape = "(%d, %d)" % (4 * H, cols) if t == "weight" else "(%d,)" % (4 * H)
                nodes.append(node("null", name, attrs={"__shape__": shape}))
                nodes.append(node("Reshape", "lstm0_reshape%d" % len(pieces), [len(nodes) - 1], {"shape": "(-1,)"}))
                pieces.append(len(nodes) - 1)
    nodes.append(node("_rnn_param_concat", "lstm0_rnn_param_concat0", pieces, {"dim": "0", "num_args": str(len(pieces))}))
    cat = len(nodes) - 1
    nodes += [node("null", "data1"), node("null", "data2")]
    nodes.append(node("RNN", "lstm0_rnn0", [2, cat, cat + 1, cat + 2],
                      {"bidirectional": "False", "lstm_state_clip_max": "None", "lstm_state_clip_min": "None",
                       "lstm_state_clip_nan": "False", "mode": "lstm", "num_layers": str(L), "p": "0.0",
                       "projection_size": "None", "state_outputs": "True", "state_size": str(H),
                       "use_sequence_length": "False"}))
    rnn = len(nodes) - 1
    nodes.append(node("Reshape", "reshape0", [rnn], {"shape": "(-1, %d)" % H}))
    nodes += [node("null", "dense0_weight", attrs={"__shape__": "(%d, %d)" % (V, H)}),
              node("null", "dense0_bias", attrs={"__shape__": "(%d,)" % V})]
    nodes.append(node("FullyConnected", "dense0_fwd", [rnn + 1, rnn + 2, rnn + 3],
                      {"flatten": "True", "no_bias": "False", "num_hidden": str(V)}))
    nodes.append(node("null", "softmax_label"))
    nodes.append(node("SoftmaxOutput", "softmax", [rnn + 4, rnn + 5]))
    args = [i for i, n in enumerate(nodes) if n["op"] == "null"]
    rows = [0]
    for n in nodes:
        rows.append(rows[-1] + (3 if n["op"] == "RNN" else 1))
    return {"nodes": nodes, "arg_nodes": args, "node_row_ptr": rows,
            "heads": [[len(nodes) - 1, 0, 0]], "attrs": {"mxnet_version": ["int", 10900]}}


def rec_v2(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    head = struct.pack("<Ii", 0xF993FAC9, 0) + struct.pack("<i", a.ndim)
    head += b"".join(struct.pack("<q", d) for d in a.shape)
    return head + struct.pack("<iii", 1, 0, 0) + a.tobytes()


def write_params(path, items):
    data = struct.pack("<QQQ", 0x112, 0, len(items)) + b"".join(rec_v2(a) for _, a in items)
    data += struct.pack("<Q", len(items))
    for name, _ in items:
        b = name.encode()
        data += struct.pack("<Q", len(b)) + b
    with open(path, "wb") as f:
        f.write(data)


def packed(lstm, attr):
    ws, bs = [], []
    for l in range(L):
        ws += [getattr(getattr(lstm, f"weight_ih_l{l}"), attr), getattr(getattr(lstm, f"weight_hh_l{l}"), attr)]
        bs += [getattr(getattr(lstm, f"bias_ih_l{l}"), attr), getattr(getattr(lstm, f"bias_hh_l{l}"), attr)]
    return torch.cat([t.reshape(-1) for t in ws + bs])


def main():
    with open(os.path.join(HERE, "fused_rnn_lm-symbol.json"), "w") as f:
        json.dump(symbol_json(), f, indent=2)
        f.write("\n")
    # Values rounded to float32 first, so PyTorch (float64) sees what mxplug loads.
    f32 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32).astype(np.float64))
    emb = torch.nn.Embedding(V, E)
    lstm = torch.nn.LSTM(E, H, num_layers=L)
    pred = torch.nn.Linear(H, V)
    with torch.no_grad():
        for m in (emb, lstm, pred):
            for p in m.parameters():
                p.copy_(f32(rng.uniform(-0.5, 0.5, size=tuple(p.shape))))
    data = rng.integers(0, V, size=(T, N))
    label = rng.integers(0, V, size=(T * N,))
    x = emb(torch.from_numpy(data))
    zeros = torch.zeros(L, N, H)
    y, _ = lstm(x, (zeros, zeros))
    logits = pred(y.reshape(-1, H))
    prob = torch.softmax(logits, dim=1)
    loss = -torch.log(prob[torch.arange(T * N), torch.from_numpy(label)]).sum()
    loss.backward()
    write_params(os.path.join(HERE, "fused_rnn_lm-0000.params"), [
        ("arg:embed_weight", emb.weight.detach().numpy()),
        ("arg:lstm_parameters", packed(lstm, "data").detach().numpy()),
        ("arg:pred_weight", pred.weight.detach().numpy()),
        ("arg:pred_bias", pred.bias.detach().numpy()),
    ])
    with open(os.path.join(HERE, "gluon_rnn_lm-symbol.json"), "w") as f:
        json.dump(gluon_symbol_json(), f, indent=2)
        f.write("\n")
    gluon = [("arg:embedding0_weight", emb.weight.detach().numpy())]
    for t in ("weight", "bias"):
        for l in range(L):
            for g, tg in (("i2h", "ih"), ("h2h", "hh")):
                gluon.append(("arg:lstm0_l%d_%s_%s" % (l, g, t), getattr(lstm, "%s_%s_l%d" % (t, tg, l)).detach().numpy()))
    gluon += [("arg:dense0_weight", pred.weight.detach().numpy()), ("arg:dense0_bias", pred.bias.detach().numpy())]
    write_params(os.path.join(HERE, "gluon_rnn_lm-0000.params"), gluon)
    rows = [("data", data), ("softmax_label", label), ("softmax_output", prob.detach().numpy()),
            ("grad_lstm_parameters", packed(lstm, "grad").numpy()), ("grad_embed_weight", emb.weight.grad.numpy())]
    with open(os.path.join(HERE, "fused_rnn_lm_ref.txt"), "w") as f:
        for name, a in rows:
            a = np.asarray(a, dtype=np.float64).ravel()
            f.write("%s %d | %s\n" % (name, a.size, " ".join(repr(float(v)) for v in a)))


if __name__ == "__main__":
    main()
