#!/usr/bin/env python3
"""Writes resnet20-symbol.json: ResNet-20 for 32x32 images in the CIFAR
layout of He et al. 2015 (3x3 conv 16 -> 3 stages of 3 basic blocks with
16, 32, 64 filters, stride 2 at stages 2 and 3 with a 1x1 projection
shortcut -> global average pooling -> 10-way FullyConnected ->
SoftmaxOutput), post-activation blocks (conv-BN-ReLU-conv-BN, add, ReLU),
convolutions without bias (BatchNorm follows each).  The file is MXNet
1.9 symbol JSON as mx.sym.load reads it; names follow MXNet's conventions
(stage1_unit1_conv1_weight, ..._gamma/_beta/_moving_mean/_moving_var).
Run it to regenerate the JSON (deterministic)."""
import json
import os

nodes, arg_nodes, row_ptr = [], [], [0]


def add(op, name, inputs, attrs=None, outputs=1):
    node = {"op": op, "name": name, "inputs": [[i, o, 0] for i, o in inputs]}
    if attrs:
        node["attrs"] = {k: str(v) for k, v in attrs.items()}
    nodes.append(node)
    if op == "null":
        arg_nodes.append(len(nodes) - 1)
    row_ptr.append(row_ptr[-1] + outputs)
    return len(nodes) - 1


def var(name):
    return add("null", name, [])


def conv(x, name, filters, kernel, stride, pad):
    w = var(name + "_weight")
    return add("Convolution", name, [(x, 0), (w, 0)],
               {"kernel": "(%d, %d)" % (kernel, kernel), "stride": "(%d, %d)" % (stride, stride),
                "pad": "(%d, %d)" % (pad, pad), "num_filter": filters, "no_bias": "True"})


def bn(x, name):
    ins = [(x, 0)] + [(var(name + "_" + p), 0) for p in ("gamma", "beta", "moving_mean", "moving_var")]
    return add("BatchNorm", name, ins, {"eps": "1e-05", "momentum": "0.9", "fix_gamma": "False"}, outputs=3)


def relu(x, name):
    return add("Activation", name, [(x, 0)], {"act_type": "relu"})


x = var("data")
x = relu(bn(conv(x, "conv0", 16, 3, 1, 1), "bn0"), "relu0")
for s, filters in enumerate((16, 32, 64), start=1):
    for u in range(1, 4):
        p = "stage%d_unit%d" % (s, u)
        stride = 2 if (s > 1 and u == 1) else 1
        y = relu(bn(conv(x, p + "_conv1", filters, 3, stride, 1), p + "_bn1"), p + "_relu1")
        y = bn(conv(y, p + "_conv2", filters, 3, 1, 1), p + "_bn2")
        sc = x
        if stride != 1:
            sc = bn(conv(x, p + "_sc", filters, 1, stride, 0), p + "_sc_bn")
        x = relu(add("elemwise_add", p + "_plus", [(y, 0), (sc, 0)]), p + "_relu")
x = add("Pooling", "pool1", [(x, 0)], {"global_pool": "True", "kernel": "(8, 8)", "pool_type": "avg"})
x = add("Flatten", "flatten0", [(x, 0)])
w, b = var("fc1_weight"), var("fc1_bias")
x = add("FullyConnected", "fc1", [(x, 0), (w, 0), (b, 0)], {"num_hidden": 10})
label = var("softmax_label")
x = add("SoftmaxOutput", "softmax", [(x, 0), (label, 0)])
sym = {"nodes": nodes, "arg_nodes": arg_nodes, "node_row_ptr": row_ptr, "heads": [[x, 0, 0]],
       "attrs": {"mxnet_version": ["int", 10901]}}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet20-symbol.json")
with open(out, "w") as f:
    json.dump(sym, f, indent=2)
    f.write("\n")
