#!/bin/sh
# viz.sh — `mxplug viz` on LeNet: the DOT text has one node per op plus the
# visible inputs (counted here from the symbol file with Python's json
# module, weights and biases left out), the op labels with their
# parameters, and edges labelled with LeNet's shapes worked out by hand
# (28-5+1 = 24, /2 = 12, 12-5+1 = 8, /2 = 4, 50*4*4 = 800);
# --show-params adds the learned variables; -o .svg runs Graphviz; without
# Graphviz on PATH the .dot still comes out and the exit status says the
# picture was not drawn; --plan draws the memory plan; bad input fails
# with a clear message.
. "$(dirname "$0")/lib/common.sh"
export MXP_MANIFEST="$BUILD/plugins/manifest.yaml"
NET="$ROOT/examples/lenet/lenet-symbol.json"

run 0 "$MXPLUG" viz --help
has "$TMP/out" "usage: mxplug viz"

run 0 "$MXPLUG" viz "$NET" --shape data=1,1,28,28 -o "$TMP/lenet.dot"
[ ! -s "$TMP/out" ] || fail "-o FILE.dot printed on stdout"
D="$TMP/lenet.dot"
counts=$(python3 -c '
import json, sys
nodes = json.load(open(sys.argv[1]))["nodes"]
learned = ("_weight", "_bias")
shown = [n for n in nodes if n["op"] != "null" or not n["name"].endswith(learned)]
ops = [n for n in nodes if n["op"] != "null"]
edges = sum(1 for n in ops for i in n["inputs"] if nodes[i[0]] in shown)
print(len(shown), edges)' "$NET")
want_nodes=${counts% *}; want_edges=${counts#* }
got_nodes=$(grep -c '^  n[0-9]* \[label=' "$D" || true)
got_edges=$(grep -c '^  n[0-9]* -> n[0-9]*' "$D" || true)
[ "$got_nodes" = "$want_nodes" ] || fail "$got_nodes nodes in the DOT text, want $want_nodes"
[ "$got_edges" = "$want_edges" ] || fail "$got_edges edges in the DOT text, want $want_edges"
[ "$want_nodes" = 13 ] || fail "LeNet has 11 ops, data and softmax_label: counted $want_nodes"
hasnt "$D" "conv1_weight"
hasnt "$D" "fc2_bias"
for l in 'Convolution\n5x5/1, 20' 'Convolution\n5x5/1, 50' 'Pooling\nmax, 2x2/2x2' 'Activation\nrelu' \
         'FullyConnected\n500' 'FullyConnected\n10' 'label="Flatten"' 'label="SoftmaxOutput"' 'label="data"'; do
    has "$D" "$l"
done
# Edge shapes, in LeNet's order, batch dimension left out.
grep -o 'label=" [0-9x]*"' "$D" | tr -d '"' | sed 's/label= //' | tr '\n' ' ' > "$TMP/shapes"
has "$TMP/shapes" "1x28x28 20x24x24 20x24x24 20x12x12 50x8x8 50x8x8 50x4x4 800 500 500 10 "

run 0 "$MXPLUG" viz "$NET" --shape data=1,1,28,28 --show-params
has "$TMP/out" 'label="conv1_weight"'
has "$TMP/out" 'label=" 20x1x5x5"'     # a weight: (num_filter, channels, kh, kw), all dims
has "$TMP/out" 'n2 -> n3 [label=" 20"]' # conv1_bias
has "$TMP/out" 'label=" 10x500"'

# Rendering (Graphviz is a dependency: tools/install-deps.sh).
if command -v dot >/dev/null 2>&1; then
    run 0 "$MXPLUG" viz "$NET" --shape data=1,1,28,28 -o "$TMP/lenet.svg"
    has "$TMP/lenet.svg" "<svg"
    has "$TMP/lenet.svg" "FullyConnected"
    has "$TMP/lenet.svg" "20x24x24"
fi
mkdir "$TMP/nodot"
run 1 env PATH="$TMP/nodot" "$MXPLUG" viz "$NET" -o "$TMP/nodot/net.png"
has "$TMP/err" "Graphviz"
has "$TMP/err" "$TMP/nodot/net.dot"
[ -s "$TMP/nodot/net.dot" ] || fail "no .dot written without Graphviz"
[ ! -e "$TMP/nodot/net.png" ] || fail "a .png appeared without Graphviz"
[ -z "$(ls "$TMP/nodot" | grep tmp || true)" ] || fail "temporary left behind"

# --plan: LeNet's memory plan as an SVG written by mxplug (no Graphviz): a
# well-formed document with one bar per planned value (LeNet at batch 2 has
# 11 ops; its outputs except the loss head and their gradients are planned,
# at least 16 values), the planned and naive totals in the title and on
# stdout, planned below naive.
run 0 env PATH="$TMP/nodot" "$MXPLUG" viz "$NET" --plan --shape data=2,1,28,28 -o "$TMP/plan.svg"
has "$TMP/out" "planned"
python3 - "$TMP/plan.svg" "$TMP/out" <<'PYEOF' || fail "viz --plan picture"
import re, sys
import xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
bars = [g for g in root.iter(ns + "g") if g.find(ns + "title") is not None and g.find(ns + "rect") is not None]
assert len(bars) >= 16, len(bars)
assert any(b.find(ns + "title").text.startswith("conv1_output:") for b in bars)
assert any(b.find(ns + "title").text.startswith("grad of fc1_output:") for b in bars)
title = "".join(t.text or "" for t in root.iter(ns + "text"))
assert "planned" in title and "naive" in title, title
m = re.search(r"planned (\d+) bytes in \d+ blocks, naive (\d+) bytes", open(sys.argv[2]).read())
assert m and 0 < int(m.group(1)) < int(m.group(2)), open(sys.argv[2]).read()
PYEOF
run 2 "$MXPLUG" viz "$NET" --plan
has "$TMP/err" "--shape"
run 2 "$MXPLUG" viz "$NET" --plan --shape data=2,1,28,28 -o "$TMP/plan.png"
has "$TMP/err" ".svg"

# Bad input.
run 1 "$MXPLUG" viz "$TMP/missing.json"
has "$TMP/err" "missing.json"
printf '{"nodes": [' > "$TMP/bad.json"
run 1 "$MXPLUG" viz "$TMP/bad.json"
has "$TMP/err" "bad.json"
run 1 "$MXPLUG" viz "$NET" --shape data=1,1,28,28 --shape conv1_weight=20,3,5,5
has "$TMP/err" "conv1"
run 2 "$MXPLUG" viz "$NET" -o "$TMP/x.jpg"
has "$TMP/err" ".svg"
run 2 "$MXPLUG" viz "$NET" --shape data=1,x
has "$TMP/err" "data=1,x"
run 2 "$MXPLUG" viz
echo "$TEST_NAME: ok"
