#!/bin/sh
# io_faults.sh — I/O failure injection (issue 12 §6) with an LD_PRELOAD shim
# (tests/fixtures/packs/io_fault_shim): a checkpoint save whose fflush
# fails with ENOSPC, whose fsync fails with EIO, or whose rename fails, and
# a .params read that fails with EIO.  Each run exits 1 with the file and
# the OS's reason on stderr, never crashes, leaves the previous checkpoint
# byte for byte, writes no new .params and leaves no temporary behind.
# Data: 16 tiny MNIST-format images written here, a one-layer net.
. "$(dirname "$0")/lib/common.sh"
SHIM="$FIX/io_fault_shim.so"
[ -f "$SHIM" ] || fail "$SHIM not built"
command -v python3 >/dev/null || { echo "io_faults: skipped (no python3 to write the data)"; exit 0; }
D="$TMP/data"; mkdir -p "$D" "$TMP/ck"
python3 - "$D" <<'PY'
import gzip, struct, sys
d = sys.argv[1]
for split in ('train', 't10k'):
    with gzip.open(f'{d}/{split}-images-idx3-ubyte.gz', 'wb') as f:
        f.write(struct.pack('>IIII', 0x803, 16, 28, 28) + bytes((i * 7) % 256 for i in range(16 * 784)))
    with gzip.open(f'{d}/{split}-labels-idx1-ubyte.gz', 'wb') as f:
        f.write(struct.pack('>II', 0x801, 16) + bytes(i % 2 for i in range(16)))
PY
cat > "$TMP/net.json" <<'JSON'
{"nodes":[{"op":"null","name":"data","inputs":[]},{"op":"null","name":"fc_weight","inputs":[]},{"op":"null","name":"fc_bias","inputs":[]},{"op":"FullyConnected","name":"fc","attrs":{"num_hidden":"2"},"inputs":[[0,0,0],[1,0,0],[2,0,0]]},{"op":"null","name":"softmax_label","inputs":[]},{"op":"SoftmaxOutput","name":"softmax","inputs":[[3,0,0],[4,0,0]]}],"arg_nodes":[0,1,2,4],"heads":[[5,0,0]],"attrs":{"mxnet_version":["int",10901]}}
JSON
P="$TMP/ck/m"
train() { "$MXPLUG" train --net "$TMP/net.json" --data "mnist:$D" --batch-size 4 --seed 3 --model-prefix "$P" --no-progress "$@"; }
run 0 train --epochs 1
cp "$P-symbol.json" "$P-0001.params" "$P-0001.states" "$TMP/"

for fault in fflush:"No space left on device" fsync:"Input/output error" rename:"Invalid cross-device link"; do
    name=${fault%%:*}; why=${fault#*:}
    MXP_FAULT=$name MXP_FAULT_MATCH="$TMP/ck/" LD_PRELOAD="$SHIM" run 1 train --epochs 2 --load-epoch 1
    has "$TMP/err" "$why"
    has "$TMP/err" "$TMP/ck/m-"
    for f in m-symbol.json m-0001.params m-0001.states; do
        cmp -s "$TMP/ck/$f" "$TMP/$f" || fail "$name: $f changed"
    done
    [ ! -e "$P-0002.params" ] || fail "$name: a .params of the failed epoch exists"
    ls "$TMP/ck" | grep -q '\.tmp\.' && fail "$name: temporaries left: $(ls "$TMP/ck")"
done

MXP_FAULT=fread MXP_FAULT_MATCH="m-0001.params" LD_PRELOAD="$SHIM" run 1 train --epochs 2 --load-epoch 1
has "$TMP/err" "m-0001.params"
has "$TMP/err" "read error"
echo "io_faults: ok"
