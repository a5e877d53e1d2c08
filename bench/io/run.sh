#!/bin/sh
# bench/io/run.sh — `make bench-io`: real photographs as JPEG records,
# decoded to 224x224 with random_resized_crop + mirror + normalisation.
# Images: the wallpapers of Debian's gnome-backgrounds (WebP), converted by
# PIL to JPEG crops (8 per wallpaper at fixed positions, so 128 distinct
# images), listed and packed by `mxplug im2rec --resize 500` (shorter side
# 500, JPEG quality 90).  For THREADS in 1 2: bench.c gives the decode
# bound (TurboJPEG full decode of the same records, same thread count) and
# ImageRecordIter's rate; torch_io.py gives DataLoader + torchvision's rate
# on the same records with the same thread count.
# Env: BUILD (absolute build dir, set by make), EPOCHS (default 5).
# Last lines, one per thread count:
#   io imagerecorditer threads=<n> mxplug_ips=<x> decode_bound_ips=<y> torch_ips=<z>
set -eu
BUILD=${BUILD:?set BUILD to the build directory}
EPOCHS=${EPOCHS:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$BUILD/bench/io"
PY=/usr/bin/python3
[ -x "$bin" ] || { echo "run.sh: $bin missing (make bench-io builds it)" >&2; exit 1; }
MXP_EXTRA_DEPS="${MXP_EXTRA_DEPS:-} gnome-backgrounds python3-pil python3-torchvision" \
    "$root/tools/install-deps.sh" --if-missing
export MXP_MANIFEST="${MXP_MANIFEST:-$BUILD/plugins/manifest.yaml}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/photos/all"
$PY - "$tmp/photos/all" <<'PYEOF'
import glob, os, sys
from PIL import Image
out = sys.argv[1]
srcs = sorted(glob.glob("/usr/share/backgrounds/gnome/*.webp") + glob.glob("/usr/share/backgrounds/gnome/*.jpg"))
if not srcs:
    sys.exit("bench-io: no wallpapers in /usr/share/backgrounds/gnome (package gnome-backgrounds)")
for i, path in enumerate(srcs):
    im = Image.open(path).convert("RGB")
    w, h = im.size
    cw, ch = w * 2 // 3, h * 2 // 3
    for k in range(8):
        x = (w - cw) * (k % 4) // 3
        y = (h - ch) * (k // 4)
        im.crop((x, y, x + cw, y + ch)).save(os.path.join(out, "%02d_%d.jpg" % (i, k)), quality=90)
PYEOF
MXP_NUM_THREADS=2 "$BUILD/bin/mxplug" im2rec --list --no-shuffle "$tmp/photos" "$tmp/photos/all" >/dev/null
MXP_NUM_THREADS=2 "$BUILD/bin/mxplug" im2rec --resize 500 --quality 90 --num-thread 2 "$tmp/photos" "$tmp/photos/all"
rec="$tmp/photos.rec" idx="$tmp/photos.idx"
echo "bench-io: $(wc -l < "$idx") JPEG records, $(du -k "$rec" | cut -f1) KB, $EPOCHS epochs per measure (machine may be shared: noisy)"
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" "$2"; }
for t in 1 2; do
    MXP_NUM_THREADS=2 "$bin" "$rec" "$idx" "$t" "$EPOCHS" | tee "$tmp/mx$t"
    OMP_NUM_THREADS=1 $PY "$here/torch_io.py" "$rec" "$idx" "$t" "$EPOCHS" | tee "$tmp/pt$t"
done
for t in 1 2; do
    echo "io imagerecorditer threads=$t mxplug_ips=$(field mxplug_ips "$tmp/mx$t") decode_bound_ips=$(field decode_bound_ips "$tmp/mx$t") torch_ips=$(field torch_ips "$tmp/pt$t")"
done
