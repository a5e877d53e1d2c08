#!/usr/bin/python3
"""bench/train/compare_params.py — how far apart two trained parameter sets
are (diagnosis of bench-train's accuracy gap, not part of `make bench`).

Reads the NAME.txt (name and shape per line) + NAME.bin (float32 values in
that order) pairs that bench.c (write_params: mxplug.*, params.*) and
torch_train.py (torch.*) write with BENCH_DUMP=DIR set, and prints the
relative L2 distance ||a - b|| / ||b|| over every array both have; with -v
also per array (relative distance, largest absolute difference, norm).
A semantic difference between the two sides shows up after one step
(TRAIN_LIMIT=64 EPOCHS=1) well above float rounding (~1e-7); chaotic growth
of rounding differences takes tens to hundreds of steps.

usage: compare_params.py DIR_A NAME_A DIR_B NAME_B [-v]
"""
import os
import sys

import numpy as np


def read(d, name):
    raw = np.fromfile(os.path.join(d, name + ".bin"), np.float32)
    out, off = {}, 0
    with open(os.path.join(d, name + ".txt")) as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            shape = tuple(int(x) for x in fields[1:])
            n = int(np.prod(shape))
            if off + n > raw.size:
                sys.exit("compare_params.py: %s/%s.bin ends inside %s" % (d, name, fields[0]))
            out[fields[0]] = raw[off:off + n].reshape(shape)
            off += n
    if off != raw.size:
        sys.exit("compare_params.py: %s/%s.bin has %d floats, the .txt names %d" % (d, name, raw.size, off))
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    if len(args) != 4:
        sys.exit(__doc__)
    a, b = read(args[0], args[1]), read(args[2], args[3])
    dd = nn = 0.0
    for k in a:
        if k not in b:
            print("%s: only in %s/%s" % (k, args[0], args[1]))
            continue
        if a[k].shape != b[k].shape:
            sys.exit("compare_params.py: %s has shape %s and %s" % (k, a[k].shape, b[k].shape))
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        d, n = np.linalg.norm(x - y), np.linalg.norm(y)
        dd += d * d
        nn += n * n
        if "-v" in sys.argv:
            print("%-30s rel %.3e  maxabs %.3e  norm %.3e" % (k, d / max(n, 1e-30), np.abs(x - y).max(), n))
    print("total rel %.3e" % (np.sqrt(dd / max(nn, 1e-300))))


if __name__ == "__main__":
    main()
