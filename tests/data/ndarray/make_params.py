#!/usr/bin/env python3
"""make_params.py -- write sample.params, an MXNet NDArray list file built
byte by byte with `struct`, independently of mxplug's writer, so the loader
test checks mxplug against the format (mxnet@1.9.1 src/ndarray/ndarray.cc,
NDArray::Save / Load / LegacyLoad) rather than against itself.

Contents (name: record format, dtype, shape, values) -- the C test
tests/unit/ndarray/test_params.c checks exactly these:
  arg:w       V2      float32 (2,3)   -1.0 -0.5 0.0 0.5 1.0 1.5   context gpu(1)
  arg:b       V1      float64 (4,)    0.001 2.5 -7.25 1e10
  aux:idx     V3      int32   (2,2)   1 -2 3 -2147483648
  aux:legacy  legacy  float32 (3,)    3.0 2.0 1.0   (u32 ndim + u32 dims)
  scalar      V3      float64 ()      42.0
  none        V2      -               (stype -1, ndim 0: a "none" array)
  empty       V2      float32 (0,3)   (no data bytes)
Run: python3 make_params.py [out]   (default: sample.params beside this script)
"""
import os
import struct
import sys

V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
F32, F64, I32 = 0, 1, 4
FMT = {F32: "f", F64: "d", I32: "i"}


def shape_i64(shape):
    return struct.pack("<i", len(shape)) + b"".join(struct.pack("<q", d) for d in shape)


def tail(dev_type, dev_id, dtype, values):
    return struct.pack("<iii", dev_type, dev_id, dtype) + struct.pack("<%d%s" % (len(values), FMT[dtype]), *values)


def rec_v2(shape, dtype, values, dev=(1, 0), magic=V2):
    return struct.pack("<Ii", magic, 0) + shape_i64(shape) + tail(dev[0], dev[1], dtype, values)


def rec_v1(shape, dtype, values):
    return struct.pack("<I", V1) + shape_i64(shape) + tail(1, 0, dtype, values)


def rec_legacy(shape, dtype, values):
    return struct.pack("<I", len(shape)) + b"".join(struct.pack("<I", d) for d in shape) + tail(1, 0, dtype, values)


def rec_none():
    return struct.pack("<Iii", V2, -1, 0)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample.params")
    items = [
        ("arg:w", rec_v2((2, 3), F32, [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5], dev=(2, 1))),
        ("arg:b", rec_v1((4,), F64, [0.001, 2.5, -7.25, 1e10])),
        ("aux:idx", rec_v2((2, 2), I32, [1, -2, 3, -2147483648], magic=V3)),
        ("aux:legacy", rec_legacy((3,), F32, [3.0, 2.0, 1.0])),
        ("scalar", rec_v2((), F64, [42.0], magic=V3)),
        ("none", rec_none()),
        ("empty", rec_v2((0, 3), F32, [])),
    ]
    data = struct.pack("<QQQ", 0x112, 0, len(items))
    data += b"".join(r for _, r in items)
    data += struct.pack("<Q", len(items))
    for name, _ in items:
        b = name.encode()
        data += struct.pack("<Q", len(b)) + b
    with open(out, "wb") as f:
        f.write(data)
    print("wrote %s (%d bytes, %d arrays)" % (out, len(data), len(items)))


if __name__ == "__main__":
    main()
