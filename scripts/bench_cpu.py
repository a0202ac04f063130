#!/usr/bin/python3
"""CPU benchmark: convbank's CPU backend and PyTorch on the same shapes, in the same session.

Runs `convbank bench --json` for our times, then times torch.nn.functional.conv1d /
conv_transpose1d (Debian's python3-torch) on the same shapes, and prints one markdown table
with both and the ratio. Usage: scripts/bench_cpu.py BUILD_DIR [--batch 1] [--repeat 10]
[--workload NAME ...] [--op conv1d|conv-transpose1d --shape N,Cin,Cout,L,K,stride,padding,
dilation,groups]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

def time_torch(spec, repeat):
    """spec: one record of `convbank bench --json` (the layer's arguments and the workload)."""
    transpose = spec["op"] == "ConvTranspose1d"
    cin, cout, frames = spec["in_channels"], spec["out_channels"], spec["frames"]
    k, stride, padding = spec["kernel_size"], spec["stride"], spec["padding"]
    dilation, groups, batch = spec["dilation"], spec["groups"], spec["batch"]
    g = torch.Generator().manual_seed(1)
    x = torch.rand(batch, cin, frames, generator=g) * 2 - 1
    if transpose:
        w = torch.rand(cin, cout // groups, k, generator=g) * 2 - 1
        run = lambda: torch.nn.functional.conv_transpose1d(
            x, w, None, stride, padding, 0, groups, dilation)
    else:
        w = torch.rand(cout, cin // groups, k, generator=g) * 2 - 1
        run = lambda: torch.nn.functional.conv1d(x, w, None, stride, padding, dilation, groups)
    with torch.no_grad():
        run()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_ours(app, args, threads, tmp):
    out = os.path.join(tmp, f"ours{threads}.json")
    cmd = [app, "bench", "--repeat", str(args.repeat), "--threads", str(threads), "--json", out]
    if args.shape:
        cmd += ["--op", args.op, "--shape", args.shape]
    else:
        cmd += ["--batch", str(args.batch)]
    if args.workload:
        cmd += ["--workload", *args.workload]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return {r["workload"]: r for r in json.load(f)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=10)
    # The shapes come from `convbank bench --json` (apps/convbank/bench.cpp): one table.
    ap.add_argument("--workload", nargs="*", default=[],
                    help="workload names (default: all of `convbank bench`, none with --shape)")
    ap.add_argument("--op", choices=["conv1d", "conv-transpose1d"], default="conv1d",
                    help="the layer of --shape")
    ap.add_argument("--shape", help="one shape of your own: N,Cin,Cout,L,K,stride,padding,"
                    "dilation,groups (N is the batch; --batch is not passed with --shape, "
                    "as `convbank bench` excludes the two, so named workloads run at batch 1)")
    args = ap.parse_args()
    if args.shape and args.batch != 1:
        ap.error("--batch applies to the workloads; a --shape carries its own batch (N)")

    app = os.path.join(args.build_dir, "apps", "convbank")
    cores = os.cpu_count()
    # Like for like: both libraries on one thread, then both on every core. (PyTorch's own
    # default here is one thread, which would flatter us.)
    with tempfile.TemporaryDirectory() as tmp:
        ours = {t: run_ours(app, args, t, tmp) for t in (1, cores)}
    info = subprocess.run([app, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"CPU: {platform.processor() or platform.machine()}, {cores} cores; "
          f"PyTorch {torch.__version__}; {info}")
    print(f"batch {args.batch} (a --shape: its N), median of {args.repeat} runs after one warm-up; "
          f"ratio = PyTorch ms / convbank ms at the same thread count\n")
    print(f"| workload | convbank 1 thr ms | PyTorch 1 thr ms | ratio | convbank {cores} thr ms | "
          f"PyTorch {cores} thr ms | ratio | convbank GFLOP/s ({cores} thr) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ours[1]:
        row = [name]
        for t in (1, cores):
            torch.set_num_threads(t)
            ms_ours = ours[t][name]["median_ms"]
            ms_torch = time_torch(ours[t][name], args.repeat)
            row += [f"{ms_ours:.2f}", f"{ms_torch:.2f}", f"{ms_torch / ms_ours:.1f}x"]
        gflops = ours[cores][name]["gflop"] / ours[cores][name]["median_ms"] * 1e3
        print("| " + " | ".join(row) + f" | {gflops:.0f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
