#!/bin/sh
# train_predict.sh — `mxplug train`, `predict` and `score` end to end on
# Fashion-MNIST (the full set: one MLP epoch takes a few seconds):
#   train 1 epoch -> checkpoint files, one line per epoch (no live bar when
#   stderr is not a terminal), a sane validation accuracy; score gives the
#   same accuracy as training's validation pass; resume with --load-epoch;
#   predict on .npy files written here with Python's struct module (no
#   numpy): (N, 10) outputs whose rows are probabilities, the top class
#   printed equals the argmax of the written outputs, uint8 and float32
#   inputs agree; bad inputs (missing file, int32 .npy, wrong shape,
#   missing checkpoint, bad options) fail with a clear message and a
#   non-zero exit status.
. "$(dirname "$0")/lib/common.sh"
export MXP_MANIFEST="$BUILD/plugins/manifest.yaml"
need_fashion_mnist
PY=python3
NET="$ROOT/examples/mlp/mlp-symbol.json"

# --- train ------------------------------------------------------------------
run 0 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --epochs 1 --batch-size 64 --lr 0.01 \
    --momentum 0.9 --seed 3 --model-prefix "$TMP/mlp" --plot "$TMP/curves.svg" --log-json "$TMP/log.jsonl"
has "$TMP/out" "epoch 1/1"
# --log-json: one object per epoch, the same values as the epoch line;
# --plot: a well-formed SVG with one point per epoch in each series.
$PY - "$TMP/out" "$TMP/log.jsonl" "$TMP/curves.svg" <<'PYEOF' || fail "--plot / --log-json files do not match the epoch line"
import json, re, sys
import xml.etree.ElementTree as ET
line = next(l for l in open(sys.argv[1]) if l.startswith("epoch 1/1"))
tr = float(re.search(r"train-accuracy=([0-9.]+)", line).group(1))
va = float(re.search(r"val-accuracy=([0-9.]+)", line).group(1))
sps = float(re.search(r"samples/s=([0-9.]+)", line).group(1))
recs = [json.loads(l) for l in open(sys.argv[2])]
assert len(recs) == 1 and recs[0]["epoch"] == 1 and recs[0]["metric"] == "accuracy", recs
assert abs(recs[0]["train"] - tr) <= 5e-5 and abs(recs[0]["val"] - va) <= 5e-5, (recs, tr, va)
assert abs(recs[0]["samples_per_s"] - sps) <= 0.5 + 1e-6 * sps, (recs, sps)
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[3]).getroot()
groups = {g.get("id"): g for g in root.iter(ns + "g") if g.get("class") == "series"}
assert set(groups) == {"train", "val", "samples_per_s"}, groups
for g in groups.values():
    assert len(list(g.iter(ns + "circle"))) == 1
PYEOF
# Not a terminal: MXNet's Speedometer lines every 50 batches.
has "$TMP/out" "Epoch[0] Batch [50]"
has "$TMP/out" "samples/sec"
has "$TMP/out" "val-accuracy="
has "$TMP/out" "samples/s="
hasnt "$TMP/err" "ETA"           # no live bar: stderr is a file
for f in mlp-symbol.json mlp-0001.params mlp-0001.states; do
    [ -s "$TMP/$f" ] || fail "checkpoint file $f missing"
done
val=$(sed -n 's/.*val-accuracy=\([0-9.]*\).*/\1/p' "$TMP/out")
awk -v a="$val" 'BEGIN { exit !(a > 0.75 && a <= 1) }' || fail "validation accuracy '$val' after 1 epoch"

# score reproduces the validation accuracy of training (same data, same params)
run 0 "$MXPLUG" score --model "$TMP/mlp" --epoch 1 --data "mnist:$DATA"
has "$TMP/out" "accuracy=$val "
has "$TMP/out" "samples=10000"
has "$TMP/out" "cross-entropy="

# resume from epoch 1: trains epoch 2 only, writes the epoch-2 checkpoint;
# --profile / --profile-summary: a Chrome trace whose op events the table
# counts (the sums themselves: tests/unit/profiler), lanes named after the
# engine workers and the iterator's prefetch thread.
run 0 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --epochs 2 --seed 3 --model-prefix "$TMP/mlp" \
    --load-epoch 1 --profile "$TMP/trace.json" --profile-summary --lr-step-epochs 1 --lr-factor 0.5
has "$TMP/out" "epoch 2/2"
has "$TMP/out" "train: lr x0.5 after epoch 1 (937 updates per epoch)" # floor(60000 / 64)
hasnt "$TMP/out" "epoch 1/2"
[ -s "$TMP/mlp-0002.params" ] || fail "resumed run wrote no mlp-0002.params"
has "$TMP/out" "profile written to $TMP/trace.json"
$PY - "$TMP/trace.json" "$TMP/out" <<'PYEOF' || fail "--profile trace and --profile-summary table disagree"
import json, re, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
lanes = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert any(n.startswith("cpu(0) worker") for n in lanes.values()), lanes
assert any(n == "MNISTIter prefetch" for n in lanes.values()), lanes
ops = [e for e in ev if e.get("cat") == "op"]
calls = {}
for e in ops:
    assert e["tid"] in lanes and e["dur"] >= 0, e
    k = (e["name"], e["args"]["impl"])
    calls[k] = calls.get(k, 0) + 1
# 937 batches of 64: each of the 3 FullyConnected nodes runs backward once
# per training batch.
assert calls[("_backward_FullyConnected", "default")] >= 2 * 937, calls
rows = {}
for l in open(sys.argv[2]):
    m = re.match(r"^(\S+)\s+(\S+)\s+(\d+)\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$", l)
    if m: rows[(m.group(1), m.group(2))] = int(m.group(3))
assert rows == calls, (rows, calls)
PYEOF

# --- .npy inputs written with the standard library ----------------------------
$PY - "$DATA" "$TMP" <<'EOF'
import gzip, os, struct, sys
d, tmp = sys.argv[1], sys.argv[2]
def opn(base):
    p = os.path.join(d, base)
    return open(p, "rb") if os.path.exists(p) else gzip.open(p + ".gz", "rb")
raw = opn("t10k-images-idx3-ubyte").read()[16:16 + 8 * 784]
lab = opn("t10k-labels-idx1-ubyte").read()[8:16]
def npy(path, descr, shape, payload):
    sh = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, sh)
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + payload)
npy(tmp + "/x_f32.npy", "<f4", (8, 784), struct.pack("<%df" % (8 * 784), *[b / 256.0 for b in raw]))
npy(tmp + "/x_u8.npy", "|u1", (8, 28, 28), raw)
npy(tmp + "/x_i4.npy", "<i4", (8, 784), struct.pack("<%di" % (8 * 784), *raw))
npy(tmp + "/x_bad_shape.npy", "<f4", (8, 100), struct.pack("<800f", *([0.5] * 800)))
npy(tmp + "/x_trunc.npy", "<f4", (8, 784), struct.pack("<10f", *([0.5] * 10)))
with open(tmp + "/labels.txt", "w") as f:
    f.write(" ".join(str(x) for x in lab) + "\n")
EOF

# --- predict -----------------------------------------------------------------
# (under MXP_PROFILE: the trace is written when the process exits)
run 0 env MXP_PROFILE="$TMP/predict-%p.json" "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/x_f32.npy" \
    --output "$TMP/y_f32.npy" --top 3
ls "$TMP"/predict-*.json >/dev/null 2>&1 || fail "MXP_PROFILE wrote no trace"
$PY -c 'import json, sys; ev = json.load(open(sys.argv[1]))["traceEvents"]
assert [e["name"] for e in ev if e.get("cat") == "op" and e["args"]["node"] == "fc1"] == ["FullyConnected"], ev' \
    "$TMP"/predict-*.json || fail "MXP_PROFILE trace of predict: want one fc1 forward"
has "$TMP/out" "8 samples"
[ "$(grep -c '^[0-9]*:  [0-9]* (' "$TMP/out")" -eq 8 ] || fail "expected 8 per-sample lines"
cp "$TMP/out" "$TMP/pred_f32.txt"
run 0 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/x_u8.npy" --output "$TMP/y_u8.npy" --quiet
$PY - "$TMP" <<'EOF' || fail "predict outputs are wrong (see above)"
import re, struct, sys
tmp = sys.argv[1]
def load(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY", "no magic"
    hl = struct.unpack("<H", b[8:10])[0]
    h = b[10:10 + hl].decode()
    assert "'<f4'" in h and "False" in h, h
    shape = tuple(int(x) for x in re.search(r"\(([^)]*)\)", h).group(1).replace(",", " ").split())
    n = 1
    for s in shape: n *= s
    return shape, struct.unpack("<%df" % n, b[10 + hl:10 + hl + 4 * n])
s1, y1 = load(tmp + "/y_f32.npy")
s2, y2 = load(tmp + "/y_u8.npy")
assert s1 == (8, 10) and s2 == (8, 10), (s1, s2)
labels = [int(x) for x in open(tmp + "/labels.txt").read().split()]
lines = [l for l in open(tmp + "/pred_f32.txt") if re.match(r"^\d+:", l)]
hits = 0
for i in range(8):
    row = y1[10 * i:10 * i + 10]
    assert abs(sum(row) - 1) < 1e-4 and min(row) >= 0, ("row %d is not a distribution" % i, row)
    top = max(range(10), key=lambda c: row[c])
    printed = int(lines[i].split()[1])
    assert printed == top, ("printed top class differs from the output", i, printed, top)
    assert max(abs(a - b) for a, b in zip(row, y2[10 * i:10 * i + 10])) < 1e-5, "u8 and f32 inputs disagree"
    hits += top == labels[i]
assert hits >= 6, "only %d of 8 test samples right" % hits
EOF

# NDArray .params input: an array named "data" (MXNet's V2 record layout,
# written by hand), and a file without one
$PY - "$TMP" <<'EOF'
import struct, sys
def params(path, name, shape, vals):
    out = struct.pack("<QQQ", 0x112, 0, 1)
    out += struct.pack("<Iii", 0xF993FAC9, 0, len(shape)) + struct.pack("<%dq" % len(shape), *shape)
    out += struct.pack("<iii", 1, 0, 0) + struct.pack("<%df" % len(vals), *vals)
    out += struct.pack("<QQ", 1, len(name)) + name.encode()
    open(path, "wb").write(out)
params(sys.argv[1] + "/in.params", "data", (2, 784), [0.25] * 1568)
params(sys.argv[1] + "/other.params", "other", (2, 784), [0.25] * 1568)
EOF
run 0 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/in.params"
has "$TMP/out" "2 samples"
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/other.params"
has "$TMP/err" "no array named 'data'"

# --- bad inputs ---------------------------------------------------------------
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/no-such.npy"
has "$TMP/err" "cannot open input"
has "$TMP/err" "no-such.npy"
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/x_i4.npy"
has "$TMP/err" "'<i4' is not supported"
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/x_bad_shape.npy"
has "$TMP/err" "does not fit"
has "$TMP/err" "(8,100)"
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/x_trunc.npy"
has "$TMP/err" "truncated data"
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 7 --input "$TMP/x_f32.npy"
has "$TMP/err" "mlp-0007.params"
echo "not an array" > "$TMP/junk.bin"
run 1 "$MXPLUG" predict --model "$TMP/mlp" --epoch 1 --input "$TMP/junk.bin"
has "$TMP/err" "neither a .npy file nor an NDArray file"
run 2 "$MXPLUG" predict --model "$TMP/mlp" --input "$TMP/x_f32.npy"
has "$TMP/err" "--epoch E is required"
run 2 "$MXPLUG" train --data "mnist:$DATA"
has "$TMP/err" "--net FILE.json is required"
run 2 "$MXPLUG" train --net "$NET" --data "$DATA"
has "$TMP/err" "expected mnist:DIR"
run 1 "$MXPLUG" train --net "$NET" --data "mnist:$TMP/nowhere"
has "$TMP/err" "train-images-idx3-ubyte"
run 2 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --optimizer lbfgs
has "$TMP/err" "use sgd or adam"
run 2 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --epochs zero
has "$TMP/err" "--epochs"
run 2 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --lr-step-epochs 2,2
has "$TMP/err" "--lr-step-epochs '2,2': epochs must increase"
run 2 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --lr-factor 1.5
has "$TMP/err" "--lr-factor must be in (0, 1]"
run 2 "$MXPLUG" train --net "$NET" --data "mnist:$DATA" --shard rows
has "$TMP/err" "--shard 'rows': use strided or contiguous"
run 1 "$MXPLUG" score --model "$TMP/nope" --epoch 1 --data "mnist:$DATA"
has "$TMP/err" "nope-symbol.json"
for c in train predict score; do
    run 0 "$MXPLUG" "$c" --help
    has "$TMP/out" "usage: mxplug $c"
done
echo "train_predict: ok"
