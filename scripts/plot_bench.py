#!/usr/bin/python3
"""Plots convbank-bench-cuda's JSON: per workload, the time of our kernel and of cuDNN in TF32
mode, both relative to cuDNN fp32 in the same run (below 1 = faster than cuDNN fp32), with the
workloads.md targets where they are given as times. Needs python3-matplotlib.

Usage: scripts/plot_bench.py BENCH.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# ../shared/workloads.md's absolute targets (ms on the H200, fp32-accurate).
TARGETS_MS = {"seedA": 2.0, "seedB": 4.0, "enc_tasnet": 0.16, "dec_tasnet": 0.16,
              "enc_stft512": 0.25, "dec_stft512": 0.20, "tcn_depthwise": 0.30,
              "tcn_pointwise": 0.35, "up2x": 0.25}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        bench = json.load(f)
    rows = [r for r in bench["results"] if r.get("cudnn_fp32_ms")]
    names = [r["workload"] for r in rows]
    ours = [r["ours_ms"] / r["cudnn_fp32_ms"] for r in rows]
    tf32 = [r["cudnn_tf32_ms"] / r["cudnn_fp32_ms"] if r.get("cudnn_tf32_ms") else float("nan")
            for r in rows]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], ours, 0.4, label="convbank (fp32-accurate)", color="#2b6cb0")
    ax.bar([i + 0.2 for i in x], tf32, 0.4, label="cuDNN TF32 (not fp32-accurate)", color="#c0c0c0")
    labelled = False
    for i, r in enumerate(rows):
        if r["workload"] in TARGETS_MS:
            ax.plot([i - 0.4, i + 0.4], [TARGETS_MS[r["workload"]] / r["cudnn_fp32_ms"]] * 2,
                    color="#c53030", linewidth=2, label=None if labelled else "target")
            labelled = True
        ax.text(i - 0.2, ours[i] + 0.02, f"{ours[i]:.2f}", ha="center", fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=35, ha="right")
    ax.set_ylabel("time / cuDNN fp32 time (lower is faster)")
    ax.set_title(f"{bench['device']}, {bench['cudnn']}, {bench['date']}, median of {bench['runs']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
