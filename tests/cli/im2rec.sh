#!/bin/sh
# im2rec.sh — `mxplug im2rec` end to end, checked by an independent reader
# (Python's struct for RecordIO, PIL for the images):
#   --list --recursive on a generated folder tree: one label per sorted
#   sub-folder, sorted files, --train-ratio split; packing with --resize and
#   --encoding .png on 2 threads: records in list order, keys and labels from
#   the list, shorter side resized, solid colours kept exactly; a corrupt
#   image is skipped with a warning naming it and counted; --pass-through
#   stores the file's bytes; --from-mnist --encoding .png gives the IDX
#   pixels exactly; bad usage fails clearly.
. "$(dirname "$0")/lib/common.sh"
PY=/usr/bin/python3
$PY -c "import PIL" 2>/dev/null || { echo "im2rec: skipped (python3-pil not installed)"; exit 0; }
DATA=${MXP_DATA:-/usr/share/datasets/fashion-mnist}

# --- a tree: cat/{a.png,b.jpg} dog/{c.png,d.jpg(corrupt)} and a stray txt
$PY - "$TMP/tree" <<'PYEOF'
import os, sys
from PIL import Image
root = sys.argv[1]
for d in ("cat", "dog"):
    os.makedirs(os.path.join(root, d))
Image.new("RGB", (20, 10), (200, 40, 10)).save(os.path.join(root, "cat", "a.png"))
Image.new("RGB", (12, 30), (0, 128, 255)).save(os.path.join(root, "cat", "b.jpg"), quality=100)
Image.new("RGB", (16, 16), (9, 9, 9)).save(os.path.join(root, "dog", "c.png"))
open(os.path.join(root, "dog", "d.jpg"), "wb").write(b"\xff\xd8\xff\xe0 not really a jpeg")
open(os.path.join(root, "dog", "notes.txt"), "w").write("x")
PYEOF
run 0 "$MXPLUG" im2rec --list --recursive --no-shuffle "$TMP/set" "$TMP/tree"
printf '0\t0\tcat/a.png\n1\t0\tcat/b.jpg\n2\t1\tdog/c.png\n3\t1\tdog/d.jpg\n' > "$TMP/want.lst"
cmp -s "$TMP/set.lst" "$TMP/want.lst" || fail "set.lst differs: $(cat "$TMP/set.lst")"
run 0 "$MXPLUG" im2rec --list --recursive --train-ratio 0.5 "$TMP/split" "$TMP/tree"
[ "$(wc -l < "$TMP/split_train.lst")" -eq 2 ] && [ "$(wc -l < "$TMP/split_val.lst")" -eq 2 ] \
    || fail "train/val split is not 2 + 2"

# --- pack
run 0 "$MXPLUG" im2rec --resize 8 --encoding .png --num-thread 2 "$TMP/set" "$TMP/tree"
has "$TMP/err" "dog/d.jpg"
has "$TMP/out" "3 records, 1 skipped"
$PY - "$TMP/set" <<'PYEOF' || fail "records do not read back as written"
import io, struct, sys
from PIL import Image
prefix = sys.argv[1]
data = open(prefix + ".rec", "rb").read()
idx = [tuple(map(int, l.split("\t"))) for l in open(prefix + ".idx")]
want = [(0, 0.0, (16, 8), (200, 40, 10)), (1, 0.0, (8, 20), (0, 128, 255)), (2, 1.0, (8, 8), (9, 9, 9))]
assert [k for k, _ in idx] == [0, 1, 2], idx
for (key, off), (wkey, wlabel, wsize, wrgb) in zip(idx, want):
    magic, lrec = struct.unpack_from("<II", data, off)
    assert magic == 0xced7230a and lrec >> 29 == 0, (magic, lrec)
    n = lrec & ((1 << 29) - 1)
    flag, label, id1, id2 = struct.unpack_from("<IfQQ", data, off + 8)
    assert (flag, label, id1) == (0, wlabel, wkey), (flag, label, id1)
    im = Image.open(io.BytesIO(data[off + 8 + 24: off + 8 + n])).convert("RGB")
    assert im.size == wsize, (im.size, wsize)
    px = set(im.getdata())
    if wkey != 1:  # PNG source: exact
        assert px == {wrgb}, (key, px)
    else:          # JPEG source: within JPEG error
        assert all(max(abs(a - b) for a, b in zip(p, wrgb)) <= 6 for p in px), px
PYEOF

# --- pass-through keeps the bytes
run 0 "$MXPLUG" im2rec --pass-through "$TMP/set" "$TMP/tree"
$PY - "$TMP/set" "$TMP/tree/cat/b.jpg" <<'PYEOF' || fail "--pass-through changed the bytes"
import struct, sys
data = open(sys.argv[1] + ".rec", "rb").read()
off = [int(l.split("\t")[1]) for l in open(sys.argv[1] + ".idx")][1]
n = struct.unpack_from("<I", data, off + 4)[0] & ((1 << 29) - 1)
assert data[off + 8 + 24: off + 8 + n] == open(sys.argv[2], "rb").read()
PYEOF

# --- from MNIST-format IDX files, lossless PNG
if [ -d "$DATA" ]; then
    run 0 "$MXPLUG" im2rec --from-mnist "$DATA" "$TMP/fm" --set t10k --encoding .png --limit 40
    has "$TMP/out" "40 records, 0 skipped"
    $PY - "$TMP/fm" "$DATA" <<'PYEOF' || fail "--from-mnist pixels or labels differ from the IDX files"
import gzip, io, struct, sys
from PIL import Image
prefix, data_dir = sys.argv[1:3]
imgs = gzip.open(data_dir + "/t10k-images-idx3-ubyte.gz").read()[16:]
labs = gzip.open(data_dir + "/t10k-labels-idx1-ubyte.gz").read()[8:]
data = open(prefix + ".rec", "rb").read()
for line in open(prefix + ".idx"):
    k, off = map(int, line.split("\t"))
    n = struct.unpack_from("<I", data, off + 4)[0] & ((1 << 29) - 1)
    flag, label, id1, _ = struct.unpack_from("<IfQQ", data, off + 8)
    assert id1 == k and label == labs[k], (k, label, labs[k])
    im = Image.open(io.BytesIO(data[off + 32: off + 8 + n]))
    assert im.size == (28, 28) and im.tobytes() == imgs[k * 784:(k + 1) * 784], k
PYEOF
fi

# --- bad usage
run 2 "$MXPLUG" im2rec --quality 0 "$TMP/set" "$TMP/tree"
has "$TMP/err" "--quality"
run 1 "$MXPLUG" im2rec "$TMP/nolist" "$TMP/tree"
has "$TMP/err" "nolist.lst"
echo "im2rec: ok"
