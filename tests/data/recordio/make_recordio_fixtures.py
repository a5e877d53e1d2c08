#!/usr/bin/env python3
"""Writes the RecordIO fixtures of tests/unit/io/test_recordio.c with only
`struct`, from the format as dmlc-core documents it (include/dmlc/recordio.h),
independently of mxplug's C writer:

  chunk = <u32 magic 0xced7230a> <u32 lrec = cflag << 29 | length> payload
          zero padding to 4 bytes
  A payload holding the magic at a 4-aligned offset is cut there (the 4 magic
  bytes dropped): first part cflag 1, middle parts 2, last part 3; an uncut
  payload is one chunk with cflag 0.
  Image payload = IRHeader '<IfQQ' (flag, label, id, id2), flag float32
  labels when flag > 0, then the image bytes.
  .idx = "key\\toffset\\n" per record.

Outputs (next to this script): tiny.rec, tiny.idx, payload_<k>.bin (each
record's payload as plain bytes), tiny_truncated.rec (last 6 bytes cut),
bad_past_end.idx (an offset past the end).  Run it again to regenerate;
the output is deterministic."""
import os
import struct

MAGIC = 0xCED7230A
HERE = os.path.dirname(os.path.abspath(__file__))


def encode(payload):
    parts = []
    start = 0
    for i in range(0, len(payload) - len(payload) % 4, 4):
        if struct.unpack_from('<I', payload, i)[0] == MAGIC:
            parts.append(payload[start:i])
            start = i + 4
    parts.append(payload[start:])
    out = b''
    for n, part in enumerate(parts):
        if len(parts) == 1:
            cflag = 0
        elif n == 0:
            cflag = 1
        elif n == len(parts) - 1:
            cflag = 3
        else:
            cflag = 2
        out += struct.pack('<II', MAGIC, cflag << 29 | len(part)) + part
        out += b'\0' * (-len(part) % 4)
    return out


def image(flag, label, id_, id2, labels, img):
    return struct.pack('<IfQQ', flag, label, id_, id2) + struct.pack('<%df' % len(labels), *labels) + img


m = struct.pack('<I', MAGIC)
payloads = [
    image(0, 3.0, 0, 0, [], b'abc'),                                        # one chunk, 1 pad byte
    image(2, 0.0, 1, 7, [1.5, -2.0], m + b'xyz!' + m + b'end'),             # three parts
    m,                                                                      # two empty parts
    b'',                                                                    # empty record
    image(0, 9.0, 4, 0, [], bytes(range(256)) * 3 + b'\x01\x0a\x23\xd7\xce'),  # magic at an unaligned offset: one chunk
]
keys = [0, 1, 2, 3, 4]

rec = b''
idx = ''
for k, p in zip(keys, payloads):
    idx += '%d\t%d\n' % (k, len(rec))
    rec += encode(p)
    with open(os.path.join(HERE, 'payload_%d.bin' % k), 'wb') as f:
        f.write(p)
with open(os.path.join(HERE, 'tiny.rec'), 'wb') as f:
    f.write(rec)
with open(os.path.join(HERE, 'tiny.idx'), 'w') as f:
    f.write(idx)
with open(os.path.join(HERE, 'tiny_truncated.rec'), 'wb') as f:
    f.write(rec[:-6])
with open(os.path.join(HERE, 'bad_past_end.idx'), 'w') as f:
    f.write('0\t0\n1\t%d\n' % (len(rec) + 4))
