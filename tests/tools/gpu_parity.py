#!/usr/bin/env python3
"""GPU parity: `convbank conv1d|conv-transpose1d --device cuda` against PyTorch.

Draws ~20 random layer configurations (every argument: stride, padding incl. same/valid,
dilation, groups, bias, padding modes, output_padding), writes input/weight/bias as .npy, runs
the convbank app on the GPU and compares its output with
  - PyTorch float32 on CUDA with TF32 off (cudnn.allow_tf32 = matmul.allow_tf32 = False), and
  - PyTorch float64 on the CPU (the accuracy bar: relative L2 <= 1e-6).
Exit status 0 only when every configuration passes.

usage: gpu_parity.py --app build-gpu/apps/convbank [--count 20] [--seed 1] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def rel_l2(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def random_config(rng, i):
    transposed = i % 2 == 1
    groups = int(rng.choice([1, 1, 1, 2, 4]))
    wide = i % 3 == 0
    cin = groups * int(rng.choice([16, 24, 32] if wide else [1, 2, 3, 8]))
    cout = groups * int(rng.choice([32, 40, 64] if wide else [1, 2, 5, 12]))
    k = int(rng.choice([1, 2, 3, 3, 4, 5, 16]))
    stride = int(rng.choice([1, 1, 2, 3, 4, 8]))
    dilation = int(rng.choice([1, 1, 2, 3]))
    batch = int(rng.integers(1, 4))
    frames = int(rng.integers(20, 3000))
    bias = bool(rng.integers(0, 4) != 0)
    if wide and i % 6 == 0:  # the Winograd shapes
        k, stride, dilation = 3, 1, 1
    cfg = dict(transposed=transposed, cin=cin, cout=cout, k=k, stride=stride,
               dilation=dilation, groups=groups, batch=batch, frames=frames, bias=bias)
    if transposed:
        cfg["padding"] = int(rng.integers(0, 4))
        cfg["output_padding"] = int(rng.integers(0, max(stride, dilation)))
    else:
        mode = str(rng.choice(["zeros", "zeros", "reflect", "replicate", "circular"]))
        pk = int(rng.integers(0, 6))
        if pk == 0:
            padding = "valid"
        elif pk == 1 and stride == 1:
            padding = "same"
        else:
            padding = int(rng.integers(0, 4))
        cfg["padding"] = padding
        cfg["padding_mode"] = mode
    return cfg


def torch_module(cfg):
    if cfg["transposed"]:
        return torch.nn.ConvTranspose1d(cfg["cin"], cfg["cout"], cfg["k"], stride=cfg["stride"],
                                        padding=cfg["padding"],
                                        output_padding=cfg["output_padding"],
                                        groups=cfg["groups"], bias=cfg["bias"],
                                        dilation=cfg["dilation"])
    return torch.nn.Conv1d(cfg["cin"], cfg["cout"], cfg["k"], stride=cfg["stride"],
                           padding=cfg["padding"], dilation=cfg["dilation"],
                           groups=cfg["groups"], bias=cfg["bias"],
                           padding_mode=cfg["padding_mode"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        i = 0
        while len(rows) < args.count and i < args.count * 10:
            cfg = random_config(rng, i)
            i += 1
            try:
                mod = torch_module(cfg)
            except (ValueError, RuntimeError):
                continue
            x = rng.standard_normal((cfg["batch"], cfg["cin"], cfg["frames"])).astype(np.float32)
            w = (rng.standard_normal(tuple(mod.weight.shape)) /
                 np.sqrt(mod.weight.shape[1] * cfg["k"])).astype(np.float32)
            b = rng.standard_normal((cfg["cout"],)).astype(np.float32) if cfg["bias"] else None
            with torch.no_grad():
                mod.weight.copy_(torch.from_numpy(w))
                if b is not None:
                    mod.bias.copy_(torch.from_numpy(b))
                try:
                    ref64 = mod.double()(torch.from_numpy(x).double()).numpy()
                except RuntimeError:
                    continue  # PyTorch rejects it (e.g. reflect padding >= frames)
                ref32 = mod.float().cuda()(torch.from_numpy(x).cuda()).cpu().numpy()
            paths = {n: os.path.join(tmp, f"{n}{i}.npy") for n in ("x", "w", "b", "y")}
            np.save(paths["x"], x)
            np.save(paths["w"], w)
            cmd = [args.app, "conv-transpose1d" if cfg["transposed"] else "conv1d",
                   "--device", "cuda", "--input", paths["x"], "--weight", paths["w"],
                   "--output", paths["y"], "--stride", str(cfg["stride"]),
                   "--dilation", str(cfg["dilation"]), "--groups", str(cfg["groups"]),
                   "--padding", str(cfg["padding"])]
            if cfg["transposed"]:
                cmd += ["--output-padding", str(cfg["output_padding"])]
            else:
                cmd += ["--padding-mode", cfg["padding_mode"]]
            if b is not None:
                np.save(paths["b"], b)
                cmd += ["--bias", paths["b"]]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            row = dict(cfg)
            if proc.returncode != 0:
                row.update(ok=False, error=proc.stderr.strip()[-400:])
            else:
                y = np.load(paths["y"])
                if y.shape != ref64.shape:
                    row.update(ok=False, error=f"shape {y.shape} != {ref64.shape}")
                else:
                    e64, e32 = rel_l2(y, ref64), rel_l2(y, ref32)
                    t32 = rel_l2(ref32, ref64)
                    row.update(rel_l2_vs_f64=e64, rel_l2_vs_torch_fp32=e32, torch_fp32_vs_f64=t32,
                               ok=bool(np.all(np.isfinite(y)) and e64 <= 1e-6))
            failures += 0 if row["ok"] else 1
            rows.append(row)
            desc = ("ConvT" if cfg["transposed"] else "Conv ") + \
                f" {cfg['batch']}x{cfg['cin']}->{cfg['cout']} L{cfg['frames']} K{cfg['k']} " \
                f"s{cfg['stride']} p{cfg['padding']} d{cfg['dilation']} g{cfg['groups']} " \
                f"{cfg.get('padding_mode', 'op' + str(cfg.get('output_padding')))} bias={cfg['bias']}"
            if "rel_l2_vs_f64" in row:
                print(f"{'PASS' if row['ok'] else 'FAIL'} {desc}: vs f64 {row['rel_l2_vs_f64']:.2e}"
                      f", vs torch fp32 {row['rel_l2_vs_torch_fp32']:.2e}"
                      f" (torch fp32 vs f64 {row['torch_fp32_vs_f64']:.2e})", flush=True)
            else:
                print(f"FAIL {desc}: {row['error']}", flush=True)
    print(f"gpu_parity: {len(rows) - failures}/{len(rows)} configurations pass")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if failures == 0 and rows else 1


if __name__ == "__main__":
    sys.exit(main())
