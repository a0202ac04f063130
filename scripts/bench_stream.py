#!/usr/bin/python3
"""Streaming latency: convbank's stream API and PyTorch on the TasNet chain, same session.

Runs `convbank bench-stream --json` for our per-chunk times, then times PyTorch (Debian's
python3-torch, torch.set_num_threads(1)) doing the same streaming job per chunk: numpy chunk in
-> encoder Conv1d 1->512 K16 s8 over the chunk plus the carried input frames -> decoder
ConvTranspose1d 512->1 K16 s8 -> overlap-add of the carried output tail -> numpy chunk out.
PyTorch has no streaming state of its own, so the carried frames are handled here, as a user
would. Prints one markdown table with p50/p99/max of both and the p99 ratio.

--device cuda: `convbank bench-stream --device cuda` against PyTorch on the GPU with CUDA-graph
replay (TF32 off), host buffer in to host buffer out: numpy chunk -> pinned tensor -> one graph
(H2D copy, encoder, decoder, overlap-add with the carried tail, state updates, D2H copy into
pinned memory) -> synchronize -> numpy chunk out. The graph is captured once per chunk length.

Usage: scripts/bench_stream.py BUILD_DIR [--device cpu|cuda] [--count 10000]
                               [--chunks 64 128 ...] [--batches 1 8]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

K, S, C = 16, 8, 512


class TorchChainStream:
    """Chunked TasNet chain in PyTorch; chunks must be multiples of the stride (8)."""

    def __init__(self, batch, enc, dec):
        self.enc, self.dec = enc, dec
        self.in_tail = torch.zeros(batch, 1, K - S)  # encoder context: K - stride frames
        self.out_tail = torch.zeros(batch, 1, K - S)  # decoder overlap-add tail

    def process(self, chunk_np):
        x = torch.cat([self.in_tail, torch.from_numpy(chunk_np)], dim=2)
        self.in_tail = x[:, :, -(K - S):]
        e = self.enc(x)  # chunk / 8 frames
        y = torch.nn.functional.conv_transpose1d(e, self.dec.weight, stride=S)  # chunk + K - S frames
        y[:, :, : K - S] += self.out_tail
        n = chunk_np.shape[2]
        self.out_tail = y[:, :, n:].clone()
        return (y[:, :, :n] + self.dec.bias.view(1, -1, 1)).numpy()


class TorchCudaGraphChain:
    """The same chunked chain on the GPU, one CUDA graph per chunk length, pinned staging."""

    def __init__(self, batch, chunk, enc, dec):
        dev = torch.device("cuda")
        self.pin_in = torch.zeros(batch, 1, chunk).pin_memory()
        self.pin_out = torch.zeros(batch, 1, chunk).pin_memory()
        self.np_in, self.np_out = self.pin_in.numpy(), self.pin_out.numpy()
        x = torch.zeros(batch, 1, K - S + chunk, device=dev)  # carried input frames + chunk
        out_tail = torch.zeros(batch, 1, K - S, device=dev)  # decoder overlap-add tail
        bias = dec.bias.view(1, -1, 1)

        def step():
            x[:, :, K - S:].copy_(self.pin_in, non_blocking=True)
            e = enc(x)
            y = torch.nn.functional.conv_transpose1d(e, dec.weight, stride=S)
            y[:, :, : K - S] += out_tail
            out_tail.copy_(y[:, :, chunk:])
            x[:, :, : K - S].copy_(x[:, :, chunk:].clone())
            self.pin_out.copy_(y[:, :, :chunk] + bias, non_blocking=True)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            step()
        x.zero_()
        out_tail.zero_()
        torch.cuda.synchronize()
        self.stream = torch.cuda.current_stream()

    def process(self, chunk_np):
        self.np_in[...] = chunk_np
        self.graph.replay()
        self.stream.synchronize()
        return self.np_out.copy()


def time_torch(chunk, batch, count, device="cpu"):
    torch.manual_seed(0)
    enc = torch.nn.Conv1d(1, C, K, stride=S)
    dec = torch.nn.ConvTranspose1d(C, 1, K, stride=S)
    ring = [np.random.default_rng(i).uniform(-1, 1, (batch, 1, chunk)).astype(np.float32)
            for i in range(16)]
    if device == "cuda":
        enc, dec = enc.cuda(), dec.cuda()
        with torch.no_grad():
            stream = TorchCudaGraphChain(batch, chunk, enc, dec)
    else:
        stream = TorchChainStream(batch, enc, dec)
    us = []
    with torch.no_grad():
        for i in range(-200, count):
            src = ring[i % 16]
            t0 = time.perf_counter_ns()
            out = stream.process(src)
            t1 = time.perf_counter_ns()
            if i >= 0:
                us.append((t1 - t0) / 1000.0)
    assert out.shape == (batch, 1, chunk)
    us.sort()
    pick = lambda q: us[min(len(us) - 1, int(q * len(us)))]
    return {"p50_us": pick(0.5), "p99_us": pick(0.99), "max_us": us[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_dir")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--chunks", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 4096])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.device == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    app = os.path.join(args.build_dir, "apps", "convbank")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "stream.json")
        subprocess.run([app, "bench-stream", "--device", args.device, "--count", str(args.count),
                        "--json", path,
                        "--chunks", *map(str, args.chunks), "--batches", *map(str, args.batches)],
                       check=True, stdout=sys.stderr)
        ours = {(r["chunk"], r["batch"]): r for r in json.load(open(path))}
    where = (torch.cuda.get_device_name(0) + ", PyTorch with CUDA-graph replay, TF32 off"
             if args.device == "cuda" else platform.processor() or platform.machine())
    print(f"TasNet chain streaming on {args.device}, host buffer in -> host buffer out, one "
          f"thread, {args.count} chunks per row; {where}, torch {torch.__version__}\n")
    print("| chunk | batch | convbank p50 µs | p99 µs | max µs | PyTorch p50 µs | p99 µs | max µs "
          "| p99 ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch in args.batches:
        for chunk in args.chunks:
            o = ours[(chunk, batch)]
            t = time_torch(chunk, batch, args.count, args.device)
            print(f"| {chunk} | {batch} | {o['p50_us']:.1f} | {o['p99_us']:.1f} | {o['max_us']:.1f} "
                  f"| {t['p50_us']:.1f} | {t['p99_us']:.1f} | {t['max_us']:.1f} "
                  f"| {t['p99_us'] / o['p99_us']:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
