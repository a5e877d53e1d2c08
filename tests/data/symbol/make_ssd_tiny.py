#!/usr/bin/python3
"""Writes ssd_tiny_train.json: a two-scale VGG-SSD-like training symbol in
MXNet 1.x's JSON layout (nnvm SaveJSON: nodes with op/name/attrs/inputs,
arg_nodes, node_row_ptr, heads, mxnet_version 10901), built node by node
the way MXNet's example/ssd symbol_builder.py and common.py multibox_layer
compose it: per feature map a 3x3 loc and cls Convolution -> transpose
(0,2,3,1) -> Flatten, a _contrib_MultiBoxPrior -> Flatten; Concat over the
maps; cls Reshape (0,-1,classes+1) -> transpose (0,2,1); anchors Reshape
(0,-1,4); _contrib_MultiBoxTarget(anchors, label, cls_preds); SoftmaxOutput
(multi_output, use_ignore, normalization valid) on the cls target;
smooth_l1 of mask * (loc_preds - loc_target) in a MakeLoss; MakeLoss
(grad_scale 0) over cls_target and over _contrib_MultiBoxDetection; the
four heads grouped.  Attribute strings are written as MXNet's Python
frontend writes them (tuples "(0.1, 0.1, 0.2, 0.2)", floats "3.0").
Run: /usr/bin/python3 tests/data/symbol/make_ssd_tiny.py > tests/data/symbol/ssd_tiny_train.json
"""
import json

nodes, rows = [], []


def node(op, name, inputs=(), attrs=None, n_out=1):
    nodes.append({"op": op, "name": name, "inputs": [[i, k, 0] for i, k in inputs]})
    if attrs:
        nodes[-1]["attrs"] = {k: str(v) for k, v in sorted(attrs.items())}
    rows.append(n_out)
    return len(nodes) - 1


def var(name):
    return node("null", name)


def conv(x, name, nf, k=3, pad=1):
    w, b = var(name + "_weight"), var(name + "_bias")
    return node("Convolution", name, [(x, 0), (w, 0), (b, 0)],
                {"kernel": "(%d, %d)" % (k, k), "num_filter": nf, "pad": "(%d, %d)" % (pad, pad), "stride": "(1, 1)"})


data = var("data")
label = var("label")
c1 = conv(data, "conv1_1", 8)
r1 = node("Activation", "relu1_1", [(c1, 0)], {"act_type": "relu"})
p1 = node("Pooling", "pool1", [(r1, 0)], {"kernel": "(2, 2)", "pool_type": "max", "stride": "(2, 2)"})
c2 = conv(p1, "conv2_1", 16)
r2 = node("Activation", "relu2_1", [(c2, 0)], {"act_type": "relu"})
p2 = node("Pooling", "pool2", [(r2, 0)], {"kernel": "(2, 2)", "pool_type": "max", "stride": "(2, 2)"})
c3 = conv(p2, "conv3_1", 16)
r3 = node("Activation", "relu3_1", [(c3, 0)], {"act_type": "relu"})

classes = 3
layers = [("relu2_1", r2, "(0.2, 0.272)", "(1.0, 2.0, 0.5)"), ("relu3_1", r3, "(0.37, 0.447)", "(1.0, 2.0)")]
locs, clss, ancs = [], [], []
for lname, x, sizes, ratios in layers:
    k = len(sizes.split(",")) + len(ratios.split(",")) - 1
    lp = conv(x, lname + "_loc_pred_conv", 4 * k)
    lp = node("transpose", lname + "_transpose0", [(lp, 0)], {"axes": "(0, 2, 3, 1)"})
    locs.append(node("Flatten", lname + "_flatten0", [(lp, 0)]))
    cp = conv(x, lname + "_cls_pred_conv", (classes + 1) * k)
    cp = node("transpose", lname + "_transpose1", [(cp, 0)], {"axes": "(0, 2, 3, 1)"})
    clss.append(node("Flatten", lname + "_flatten1", [(cp, 0)]))
    an = node("_contrib_MultiBoxPrior", lname + "_anchors", [(x, 0)],
              {"clip": "False", "offsets": "(0.5, 0.5)", "ratios": ratios, "sizes": sizes, "steps": "(-1.0, -1.0)"})
    ancs.append(node("Flatten", lname + "_flatten2", [(an, 0)]))

loc_preds = node("Concat", "multibox_loc_pred", [(i, 0) for i in locs], {"dim": 1, "num_args": len(locs)})
cls_cat = node("Concat", "concat0", [(i, 0) for i in clss], {"dim": 1, "num_args": len(clss)})
cls_r = node("Reshape", "reshape0", [(cls_cat, 0)], {"shape": "(0, -1, %d)" % (classes + 1)})
cls_preds = node("transpose", "multibox_cls_pred", [(cls_r, 0)], {"axes": "(0, 2, 1)"})
anc_cat = node("Concat", "concat1", [(i, 0) for i in ancs], {"dim": 1, "num_args": len(ancs)})
anchors = node("Reshape", "multibox_anchors", [(anc_cat, 0)], {"shape": "(0, -1, 4)"})
tgt = node("_contrib_MultiBoxTarget", "multibox_target", [(anchors, 0), (label, 0), (cls_preds, 0)],
           {"ignore_label": "-1.0", "minimum_negative_samples": "0", "negative_mining_ratio": "3.0",
            "negative_mining_thresh": "0.5", "overlap_threshold": "0.5", "variances": "(0.1, 0.1, 0.2, 0.2)"}, n_out=3)
cls_prob = node("SoftmaxOutput", "cls_prob", [(cls_preds, 0), (tgt, 2)],
                {"grad_scale": "1.0", "ignore_label": "-1.0", "multi_output": "True", "normalization": "valid",
                 "use_ignore": "True"})
diff = node("elemwise_sub", "_minus0", [(loc_preds, 0), (tgt, 0)])
masked = node("elemwise_mul", "_mul0", [(tgt, 1), (diff, 0)])
l1 = node("smooth_l1", "loc_loss_", [(masked, 0)], {"scalar": "1.0"})
loc_loss = node("MakeLoss", "loc_loss", [(l1, 0)], {"grad_scale": "1.0", "normalization": "valid"})
cls_label = node("MakeLoss", "cls_label", [(tgt, 2)], {"grad_scale": "0"})
det = node("_contrib_MultiBoxDetection", "detection", [(cls_prob, 0), (loc_preds, 0), (anchors, 0)],
           {"force_suppress": "False", "nms_threshold": "0.45", "nms_topk": "400", "variances": "(0.1, 0.1, 0.2, 0.2)"})
det_out = node("MakeLoss", "det_out", [(det, 0)], {"grad_scale": "0"})

row_ptr = [0]
for n in rows:
    row_ptr.append(row_ptr[-1] + n)
doc = {
    "nodes": nodes,
    "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
    "node_row_ptr": row_ptr,
    "heads": [[cls_prob, 0, 0], [loc_loss, 0, 0], [cls_label, 0, 0], [det_out, 0, 0]],
    "attrs": {"mxnet_version": ["int", 10901]},
}
print(json.dumps(doc, indent=2))
