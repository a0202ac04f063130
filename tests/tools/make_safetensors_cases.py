#!/usr/bin/python3
"""safetensors fixtures for tests/test_safetensors.cpp, written independently of convbank.

The `safetensors` package is not used: each file is laid out by hand here (8-byte little-endian
header length, JSON header, data buffer) from torch tensors, so the C++ reader is checked
against a second implementation of the format rather than against itself. Next to every
tensor the script saves its values as float32 .npy (torch's own .float() conversion: exact
for F16 and BF16, round-to-nearest for F64), and cases.json lists files, tensors and copies.

    /usr/bin/python3 tests/tools/make_safetensors_cases.py [--out data/fixtures/safetensors]

Rerunning it reproduces the same files on the same PyTorch version (the version is recorded).
"""

import argparse
import json
import pathlib
import struct

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]

DTYPES = {
    torch.float32: ("F32", 4),
    torch.float16: ("F16", 2),
    torch.bfloat16: ("BF16", 2),
    torch.float64: ("F64", 8),
    torch.int64: ("I64", 8),
}


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        # NumPy has no bfloat16; the int16 view has the same bits in the same byte order.
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_file(path, tensors, metadata=None, gaps=None, order=None, trailing=b""):
    """tensors: {name: torch tensor}. gaps: {name: junk bytes placed before it}. order: the
    order of the tensors in the buffer (default: name order)."""
    gaps = gaps or {}
    header = {}
    buffer = b""
    for name in order or sorted(tensors):
        t = tensors[name]
        buffer += gaps.get(name, b"")
        data = raw_bytes(t)
        header[name] = {
            "dtype": DTYPES[t.dtype][0],
            "shape": list(t.shape),
            "data_offsets": [len(buffer), len(buffer) + len(data)],
        }
        buffer += data
    buffer += trailing
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + buffer)


def special_values(dtype):
    """Values whose conversion is easy to get wrong: signed zeros, subnormals (smallest and
    largest), the largest finite value, infinities and NaN."""
    info = torch.finfo(dtype)
    tiny = info.tiny  # smallest normal
    eps = info.eps
    smallest_subnormal = tiny * eps
    values = [0.0, -0.0, 1.0, -1.0, 1.0 / 3.0, info.max, -info.max, tiny, -tiny,
              smallest_subnormal, -smallest_subnormal, tiny - smallest_subnormal,
              3 * smallest_subnormal, float("inf"), float("-inf"), float("nan"), 0.1, 1e-3]
    return torch.tensor(values, dtype=torch.float64).to(dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "data/fixtures/safetensors")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(20240611)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    files = {}

    # Rank 1, 2 and 3 float32 with metadata, as safetensors.torch.save_file writes it.
    files["f32_ranks.safetensors"] = dict(
        tensors={"conv.weight": randn(4, 2, 3), "conv.bias": randn(4), "x": randn(2, 5)},
        metadata={"format": "pt", "note": "rank 1/2/3, \u00fcnicode \"quoted\""},
    )
    files["f16.safetensors"] = dict(
        tensors={"special": special_values(torch.float16),
                 "w": randn(3, 2, 4, dtype=torch.float16),
                 "v": randn(2, 7, dtype=torch.float16)})
    files["bf16.safetensors"] = dict(
        tensors={"special": special_values(torch.bfloat16),
                 "w": randn(2, 3, 5, dtype=torch.bfloat16)})
    # float64 beyond float32's range and precision: rounding, overflow to inf, underflow.
    wide = torch.tensor([1e300, -1e300, 1e-50, -1e-50, 1.0 + 2.0 ** -30, 1e-40, 3.4028235e38,
                         float("nan"), float("inf"), 0.1], dtype=torch.float64)
    files["f64.safetensors"] = dict(
        tensors={"wide": wide, "w": randn(2, 2, 3, dtype=torch.float64)},
        metadata={})
    # Holes between tensors and after the last one, unaligned offsets, and a buffer order that
    # differs from the name order: all allowed by the format.
    files["holes.safetensors"] = dict(
        tensors={"a": randn(3), "b": randn(2, 3, dtype=torch.float16), "c": randn(1, 2, 2),
                 "d": randn(5, dtype=torch.float64)},
        gaps={"c": b"\xab" * 3, "a": b"\xcd" * 5, "d": b"\xee"},
        order=["c", "a", "b", "d"], trailing=b"\x99" * 7,
        metadata={"holes": "yes"})
    files["empty.safetensors"] = dict(
        tensors={"empty1": torch.zeros(0), "empty3": torch.zeros(2, 0, 3),
                 "one": torch.tensor([42.0])})
    files["metadata_only.safetensors"] = dict(tensors={}, metadata={"format": "pt", "k": "v"})

    # A real state_dict: a Conv-TasNet-style encoder/decoder plus a BatchNorm, whose
    # num_batches_tracked is I64 (it must open; only its float32 conversion is refused).
    torch.manual_seed(7)
    model = torch.nn.ModuleDict({
        "encoder": torch.nn.Conv1d(1, 8, kernel_size=16, stride=8),
        "norm": torch.nn.BatchNorm1d(8),
        "decoder": torch.nn.ConvTranspose1d(8, 1, kernel_size=16, stride=8, bias=False),
    })
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    files["state_dict.safetensors"] = dict(tensors=state, metadata={"format": "pt"})

    cases = {"torch_version": torch.__version__, "files": []}
    for file_name, spec in files.items():
        write_file(out / file_name, spec["tensors"], spec.get("metadata"), spec.get("gaps"),
                   spec.get("order"), spec.get("trailing", b""))
        entry = {"file": file_name, "metadata": spec.get("metadata") or {}, "tensors": []}
        for name in sorted(spec["tensors"]):
            t = spec["tensors"][name]
            item = {"name": name, "dtype": DTYPES[t.dtype][0], "shape": list(t.shape)}
            if t.is_floating_point():
                npy = file_name.replace(".safetensors", "") + "__" + name + ".npy"
                np.save(out / npy, t.float().numpy())
                item["npy"] = npy
            entry["tensors"].append(item)
        cases["files"].append(entry)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"wrote {len(files)} files to {out}")


if __name__ == "__main__":
    main()
