#!/usr/bin/env python3
"""Prints the "Implemented" table of docs/mxnet-ops.md from the packs'
manifest fragments (plugins/*/manifest.yaml): op name, aliases, pack.
Run from the repository root:
    python3 tools/mxnet-op-table.py > /tmp/table.md
and paste it over the table in docs/mxnet-ops.md (`mxplug list` prints
the same from a build)."""
import glob
import re

rows = []
for path in sorted(glob.glob("plugins/*/manifest.yaml")):
    pack = None
    name = None
    for line in open(path):
        m = re.match(r"- name: (\S+)", line)
        if m and pack is None:
            pack = m.group(1)
            continue
        m = re.match(r"      - name: (\S+)", line)
        if m:
            name = m.group(1)
            rows.append([name, "", pack])
            continue
        m = re.match(r"        aliases: \[(.*)\]", line)
        if m and rows:
            rows[-1][1] = ", ".join("`%s`" % a.strip() for a in m.group(1).split(","))
print("| # | Op | Aliases | Pack |")
print("|---|---|---|---|")
for i, (n, a, p) in enumerate(rows, 1):
    print("| %d | `%s` | %s | %s |" % (i, n, a, p))
