#!/usr/bin/env python3
"""Accuracy of split-precision products, emulated on the CPU against float64.

3xTF32 (what the tensor-core kernels run) against 3xFP16 with the rest scaled by 2^11 (Ootomo and
Yokota, 2022), a candidate for twice the tensor rate on Hopper (docs/performance.md, "What would
move it next", item 12). Products of the parts are exact in fp32 (at most 22 significant bits);
the sums here round to nearest, where the tensor cores truncate (not emulated). Relative L2
error of a 128 x 192 by 192 x 4096 product (seedA's reduction depth) for several input scales.

    python3 scripts/split_emulation.py        # Debian's python3-torch
"""
import torch


def tf32(x):
    """x rounded to nearest with tf32's 10 explicit mantissa bits."""
    b = x.view(torch.int32)
    return ((b + 0x1000) & ~0x1FFF).view(torch.float32)


def split_tf32(x):
    big = tf32(x)
    return big, tf32(x - big)


def split_fp16(x):
    hi = x.half().float()
    return hi, ((x - hi) * 2048.0).half().float()


def rel(a, ref):
    return ((a.double() - ref).norm() / ref.norm()).item()


def run(a, b, name):
    ref = a.double() @ b.double()
    ab, as_ = split_tf32(a)
    bb, bs = split_tf32(b)
    t = ab @ bb + (ab @ bs + as_ @ bb)
    ah, al = split_fp16(a)
    bh, bl = split_fp16(b)
    f = ah @ bh + (ah @ bl + al @ bh) / 2048.0
    print(f"| {name} | {rel(a @ b, ref):.2e} | {rel(t, ref):.2e} | {rel(f, ref):.2e} |")


def log_uniform(shape, lo, hi):
    sign = torch.randint(0, 2, shape).float() * 2 - 1
    return sign * torch.pow(10.0, torch.empty(shape).uniform_(lo, hi))


def main():
    torch.manual_seed(1)
    m, k, n = 128, 192, 4096
    a = torch.randn(m, k) / k**0.5
    b = torch.randn(k, n)
    print("| data | fp32 | 3xTF32 | 3xFP16 |")
    print("|---|---|---|---|")
    run(a, b, "normal")
    run(log_uniform((m, k), -6, 3), log_uniform((k, n), -6, 3), "log-uniform 1e-6 .. 1e3")
    for scale in (1e-5, 1e-7, 1e5):
        run(a, b * scale, f"normal, input x {scale:g}")


if __name__ == "__main__":
    main()
