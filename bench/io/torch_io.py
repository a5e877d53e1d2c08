#!/usr/bin/env python3
"""bench/io/torch_io.py REC IDX THREADS EPOCHS — PyTorch's side of bench-io:
the same JPEG records (read with struct through the .idx, decoded by PIL)
through torch.utils.data.DataLoader with torchvision's RandomResizedCrop(224)
+ RandomHorizontalFlip + ToTensor + Normalize, batch 32.  THREADS=1 decodes
in the main process (num_workers=0), THREADS=n>1 uses n worker processes;
torch.set_num_threads(1) everywhere.  One warm-up epoch, then EPOCHS timed.
Prints "torch_ips=<images per second>" and, for THREADS=1, images per
second of this process's CPU time."""
import io
import struct
import sys
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

rec, idx, threads, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(rec, "rb").read()
items = []
for line in open(idx):
    key, off = map(int, line.split("\t"))
    magic, lrec = struct.unpack_from("<II", data, off)
    assert magic == 0xCED7230A and lrec >> 29 == 0, "split records are not expected in JPEG records"
    n = lrec & ((1 << 29) - 1)
    flag, label = struct.unpack_from("<If", data, off + 8)
    items.append((data[off + 8 + 24 + 4 * flag: off + 8 + n], label))

tf = transforms.Compose([
    transforms.RandomResizedCrop(224),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])


class Records(Dataset):
    def __len__(self):
        return len(items)

    def __getitem__(self, i):
        jpg, label = items[i]
        return tf(Image.open(io.BytesIO(jpg)).convert("RGB")), label


def init_worker(_):
    torch.set_num_threads(1)


torch.set_num_threads(1)
loader = DataLoader(Records(), batch_size=32, shuffle=True, num_workers=0 if threads == 1 else threads,
                    worker_init_fn=init_worker, persistent_workers=threads > 1)
rate, images, cpu = 0.0, 0, 0.0
for e in range(epochs + 1):
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for x, y in loader:
        n += x.shape[0]
    if e:
        rate += n / (time.perf_counter() - t0) / epochs
        images += n
        cpu += time.process_time() - c0
# CPU time is this process's only: meaningful for THREADS=1 (no workers).
print("torch_ips=%.0f torch_per_cpu_s=%s" % (rate, "%.0f" % (images / cpu) if threads == 1 else "n/a"))
