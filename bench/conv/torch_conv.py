"""torch_conv.py — PyTorch side of bench/conv: the same five Convolution
layers, float32, forward and forward+backward (data, weight and bias
gradients: x.requires_grad), torch.set_num_threads(2), once with the oneDNN
path (torch.backends.mkldnn.enabled = True) and once without (native).
One process = one round; per (layer, pass, path) one warm-up and --reps
timed runs, median printed as
    torch <layer> <pass> <onednn|native> <ms>
Run with Debian's /usr/bin/python3 (PyTorch 1.13) and
OPENBLAS_NUM_THREADS=1 (run.sh does both)."""
import argparse
import statistics
import time

import torch

LAYERS = [
    ("a", 32, 1, 28, 28, 20, 5, 0),
    ("b", 32, 20, 12, 12, 50, 5, 0),
    ("c", 8, 64, 56, 56, 64, 3, 1),
    ("d", 8, 128, 28, 28, 128, 3, 1),
    ("e", 8, 256, 56, 56, 64, 1, 0),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--layers", default="abcde")
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    for name, n, c, h, w, m, k, pad in LAYERS:
        if name not in args.layers:
            continue
        conv = torch.nn.Conv2d(c, m, k, padding=pad)
        x = torch.rand(n, c, h, w) - 0.5
        for bwd in (False, True):
            for path, enabled in (("onednn", True), ("native", False)):
                torch.backends.mkldnn.enabled = enabled
                xi = x.clone().requires_grad_(bwd)
                og = None
                times = []
                for r in range(args.reps + 1):
                    conv.zero_grad(set_to_none=True)
                    xi.grad = None
                    t0 = time.perf_counter()
                    if bwd:
                        y = conv(xi)
                        if og is None:
                            og = torch.rand_like(y) - 0.5
                        y.backward(og)
                    else:
                        with torch.no_grad():
                            y = conv(xi)
                    t1 = time.perf_counter()
                    if r:
                        times.append((t1 - t0) * 1e3)
                print("torch %s %s %s %.4f" % (name, "fwdbwd" if bwd else "fwd", path,
                                              statistics.median(times)), flush=True)
    torch.backends.mkldnn.enabled = True


if __name__ == "__main__":
    main()
