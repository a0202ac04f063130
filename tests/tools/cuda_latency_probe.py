#!/usr/bin/python3
"""Floors of a host-in/host-out GPU call on this machine, to tell what a streaming chunk can
cost at best: an idle-stream synchronize, a CUDA graph of N tiny kernels replayed and waited
for, and the same with the copy-engine nodes (pinned H2D + D2H) the first CUDA stream path used.
Each line: p50 / p99 in microseconds over --count replays (PyTorch 2.x, the GPU machine's).

Usage: tests/tools/cuda_latency_probe.py [--count 5000]
"""
import argparse
import time

import torch


def timed(fn, count):
    for _ in range(200):
        fn()
    ts = []
    for _ in range(count):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    ts.sort()
    return ts[len(ts) // 2] / 1e3, ts[int(len(ts) * 0.99)] / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5000)
    args = ap.parse_args()
    dev = torch.device("cuda")
    s = torch.cuda.Stream()
    a = torch.zeros(256, device=dev)
    b = torch.zeros(256, device=dev)
    pin_in = torch.zeros(256).pin_memory()
    pin_out = torch.zeros(256).pin_memory()

    def graph_of(body):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            body()  # warm (allocations outside capture)
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=s):
                body()
        return g

    def run(g):
        def fn():
            g.replay()
            s.synchronize()
        return fn

    print("| probe | p50 us | p99 us |")
    print("|---|---:|---:|")
    print("| idle stream synchronize | %.1f | %.1f |" % timed(s.synchronize, args.count))
    for n in (1, 2, 4, 6):
        g = graph_of(lambda: [b.copy_(a) for _ in range(n)])
        print("| graph of %d tiny kernels + sync | %.1f | %.1f |" % ((n,) + timed(run(g), args.count)))

    def copies():
        a.copy_(pin_in, non_blocking=True)
        b.copy_(a)
        pin_out.copy_(b, non_blocking=True)
    g = graph_of(copies)
    print("| graph H2D memcpy + kernel + D2H memcpy + sync | %.1f | %.1f |" % timed(run(g), args.count))


if __name__ == "__main__":
    main()
