#!/bin/sh
# train_bf16.sh — `mxplug train --dtype bfloat16` end to end (mixed
# precision through graph/amp.c) on Fashion-MNIST's MLP, one epoch:
#   a sane validation accuracy; the checkpoint's symbol is the converted
#   graph (every FullyConnected reads bf16 casts of data, weight and bias;
#   the ReLUs read the bf16 FC outputs with no cast between, amp.c's follow
#   list; SoftmaxOutput reads a float32 cast); the .params file holds the
#   float32 master weights under the user's names (read here with Python's
#   struct module, MXNet's V2 NDArray list layout); score on that
#   checkpoint reproduces training's validation accuracy; --load-epoch
#   resumes in bf16; an unsupported dtype is a usage error naming it.
. "$(dirname "$0")/lib/common.sh"
export MXP_MANIFEST="$BUILD/plugins/manifest.yaml"
need_fashion_mnist
PY=python3
NET="$ROOT/examples/mlp/mlp-symbol.json"

run 0 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --epochs 1 --batch-size 64 --lr 0.01 \
    --momentum 0.9 --seed 3 --model-prefix "$TMP/mlp" --dtype bfloat16
has "$TMP/out" "epoch 1/1"
val=$(sed -n 's/^epoch 1\/1 .*val-accuracy=\([0-9.]*\).*/\1/p' "$TMP/out")
awk -v a="$val" 'BEGIN { exit !(a > 0.75 && a <= 1) }' || fail "bf16 validation accuracy '$val' after 1 epoch"

$PY - "$TMP/mlp-symbol.json" "$TMP/mlp-0001.params" <<'PYEOF' || fail "the bf16 checkpoint is not the converted graph with float32 weights"
import json, struct, sys
g = json.load(open(sys.argv[1]))
nodes = g["nodes"]
def src(entry):
    return nodes[entry[0]]
def is_cast(n, dtype):
    return n["op"] == "amp_cast" and n.get("attrs", {}).get("dtype") == dtype
fcs = [n for n in nodes if n["op"] == "FullyConnected"]
assert len(fcs) == 3, [n["name"] for n in fcs]
for fc in fcs:
    ins = [src(e) for e in fc["inputs"]]
    for i, n in enumerate(ins[1:], 1):  # weight, bias: bf16 casts of the float32 variables
        assert is_cast(n, "bfloat16") and src(n["inputs"][0])["op"] == "null", (fc["name"], i, n)
    first = ins[0]  # data: the cast of the input, or a ReLU that follows a bf16 FC
    assert is_cast(first, "bfloat16") or first["op"] == "Activation", (fc["name"], first)
acts = [n for n in nodes if n["op"] == "Activation"]
assert len(acts) == 2 and all(src(a["inputs"][0])["op"] == "FullyConnected" for a in acts), acts
sm = [n for n in nodes if n["op"] == "SoftmaxOutput"]
assert len(sm) == 1 and is_cast(src(sm[0]["inputs"][0]), "float32"), sm
casts = sum(n["op"] == "amp_cast" for n in nodes)
assert casts == 8, casts  # data, 3 weights, 3 biases, the loss input

b = open(sys.argv[2], "rb").read()
magic, _, n = struct.unpack_from("<QQQ", b, 0)
assert magic == 0x112, hex(magic)
off, flags = 24, []
for _ in range(n):
    m, stype, ndim = struct.unpack_from("<Iii", b, off); off += 12
    assert m == 0xF993FAC9 and stype == 0, (hex(m), stype)
    shape = struct.unpack_from("<%dq" % ndim, b, off); off += 8 * ndim
    dev, dev_id, flag = struct.unpack_from("<iii", b, off); off += 12
    size = 1
    for s in shape: size *= s
    flags.append(flag)
    off += size * {0: 4, 12: 2}[flag]
(nn,) = struct.unpack_from("<Q", b, off); off += 8
names = []
for _ in range(nn):
    (ln,) = struct.unpack_from("<Q", b, off); off += 8
    names.append(b[off:off + ln].decode()); off += ln
assert off == len(b), (off, len(b))
assert flags == [0] * n, flags  # float32 master weights, MXNet's type flag 0
assert sorted(names) == sorted("arg:fc%d_%s" % (i, k) for i in (1, 2, 3) for k in ("weight", "bias")), names
PYEOF

# score runs the checkpoint's converted graph: the same accuracy as training's validation pass
run 0 "$MXPLUG" score --model "$TMP/mlp" --epoch 1 --data "mnist:$DATA"
has "$TMP/out" "accuracy=$val "

# resume in bf16 from the checkpoint: epoch 2 only
run 0 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --epochs 2 --seed 3 --model-prefix "$TMP/mlp" \
    --load-epoch 1 --dtype bfloat16
has "$TMP/out" "epoch 2/2"
hasnt "$TMP/out" "epoch 1/2"
[ -s "$TMP/mlp-0002.params" ] || fail "resumed bf16 run wrote no mlp-0002.params"

run 2 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --dtype float16
has "$TMP/err" "--dtype 'float16': use float32 or bfloat16"
echo "train_bf16: ok (val-accuracy $val)"
