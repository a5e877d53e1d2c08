#!/usr/bin/python3
"""Writes f16_numpy.txt and f16_sample.params: numpy's float16 conversions
as an independent reference for tests/unit/ndarray/test_f16.c.

f16_numpy.txt holds FNV-1a-64 hashes (over the little-endian result bits,
in enumeration order) of numpy's conversions of point sets the C test
enumerates the same way:
  decode   float16 -> float32 of every non-NaN half 0x0000..0xffff
  enc32    float32 -> float16 of, for every finite half h >= 0 (0..0x7bff)
           with value v and midpoint m = (v + next)/2 (next of 0x7bff is
           65536): v, m, m's float32 neighbours below and above, then the
           same four negated
  enc64    float64 -> float16 of, per h: m, m - m*2^-40, m + m*2^-40, then
           negated (a float64 -> float32 -> float16 chain rounds these twice)
and a few named values with their half bits.
f16_sample.params is an MXNet NDArray-list file (V2 records, type flag 2 =
mshadow kFloat16) written here field by field with numpy's float16 bytes.
Run: /usr/bin/python3 tests/data/ndarray/gen_f16_numpy.py
"""
import os
import struct
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
np.seterr(over="ignore")  # overflow to infinity is one of the cases


def fnv(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h


def half_val(h):
    if h == 0x7c00:
        return 65536.0
    return float(np.array([h], dtype=np.uint16).view(np.float16)[0])


hs = np.arange(65536, dtype=np.uint16)
nan = ((hs & 0x7c00) == 0x7c00) & ((hs & 0x3ff) != 0)
dec = hs[~nan].view(np.float16).astype(np.float32).view(np.uint32)
lines = ["# numpy %s float16 conversions (gen_f16_numpy.py); FNV-1a-64 of the result bits" % np.__version__]
lines.append("decode %d %016x" % (dec.size, fnv(dec.astype('<u4').tobytes())))

p32, p64 = [], []
for h in range(0x7c00):
    v, nx = half_val(h), half_val(h + 1)
    m = (v + nx) / 2
    mf = np.float32(m)
    assert float(mf) == m
    four = [np.float32(v), mf, np.nextafter(mf, np.float32(-np.inf)), np.nextafter(mf, np.float32(np.inf))]
    p32 += four + [-x for x in four]
    three = [m, m - m * 2.0 ** -40, m + m * 2.0 ** -40]
    p64 += three + [-x for x in three]
a32 = np.array(p32, dtype=np.float32)
a64 = np.array(p64, dtype=np.float64)
e32 = a32.astype(np.float16).view(np.uint16)
e64 = a64.astype(np.float16).view(np.uint16)
lines.append("enc32 %d %016x" % (e32.size, fnv(e32.astype('<u2').tobytes())))
lines.append("enc64 %d %016x" % (e64.size, fnv(e64.astype('<u2').tobytes())))
named = [1.0, -2.0, 65504.0, 65519.99, 65520.0, 1e300, -1e300, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001,
         2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 0.1, 1.0 / 3, np.inf, -np.inf, -0.0, 1e-300]
for v in named:
    b = np.array([v], dtype=np.float64).astype(np.float16).view(np.uint16)[0]
    lines.append("named %016x %04x" % (np.array([v]).view(np.uint64)[0], b))
with open(os.path.join(here, "f16_numpy.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")

# .params: one 2x3 float16 array "arg:w" and one 4-element "aux:s"
arrays = [("arg:w", np.array([[1.0, -2.5, 65504.0], [2.0 ** -24, -0.0, np.inf]], dtype=np.float16)),
          ("aux:s", np.array([0.1, 1.0 / 3, -1e-5, 3.140625], dtype=np.float16))]
out = struct.pack("<QQQ", 0x112, 0, len(arrays))
for _, a in arrays:
    out += struct.pack("<Iii", 0xF993FAC9, 0, a.ndim) + struct.pack("<%dq" % a.ndim, *a.shape)
    out += struct.pack("<iii", 1, 0, 2) + a.astype('<f2').tobytes()
out += struct.pack("<Q", len(arrays))
for n, _ in arrays:
    out += struct.pack("<Q", len(n)) + n.encode()
with open(os.path.join(here, "f16_sample.params"), "wb") as f:
    f.write(out)
