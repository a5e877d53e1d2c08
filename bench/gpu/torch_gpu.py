"""torch_gpu.py — PyTorch side of bench/gpu on the same GPU, at its best
settings (torch.backends.cudnn.benchmark = True): the five ResNet-20
(CIFAR, batch 128) 3x3 convolutions without bias, forward and
forward+backward, median of timed runs after warm-up, and LeNet training
samples/s (batch 128, SGD momentum 0.9, random data on the GPU).
Prints:
    torch conv <layer> <fwd|fwdbwd> ms=<median>
    torch train lenet sps=<x>
Exits 0 with "torch: skipped: ..." when PyTorch has no CUDA device."""
import statistics
import sys
import time

import torch

LAYERS = [("a", 16, 16, 32, 1), ("b", 16, 32, 32, 2), ("c", 32, 32, 16, 1), ("d", 32, 64, 16, 2), ("e", 64, 64, 8, 1)]


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main():
    if not torch.cuda.is_available():
        print("torch: skipped: no CUDA device")
        return
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda:0")
    for name, c, f, hw, s in LAYERS:
        conv = torch.nn.Conv2d(c, f, 3, stride=s, padding=1, bias=False).to(dev)
        x = (torch.rand(128, c, hw, hw, device=dev) - 0.5).requires_grad_(True)
        with torch.no_grad():
            print(f"torch conv {name} fwd ms={timed(lambda: conv(x), 20):.3f}", flush=True)

        def fb():
            y = conv(x)
            y.backward(torch.ones_like(y))

        print(f"torch conv {name} fwdbwd ms={timed(fb, 20):.3f}", flush=True)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 20, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Conv2d(20, 50, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Flatten(), torch.nn.Linear(800, 500), torch.nn.Tanh(), torch.nn.Linear(500, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(128, 1, 28, 28, device=dev)
    y = torch.arange(128, device=dev) % 10
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    print(f"torch train lenet sps={steps * 128 / (time.perf_counter() - t0):.1f}", flush=True)


if __name__ == "__main__":
    main()
