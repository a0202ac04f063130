#!/usr/bin/python3
"""Golden Conv1d / ConvTranspose1d cases from real PyTorch, for tests/test_torch_parity.cpp.

Each case builds torch.nn.Conv1d or torch.nn.ConvTranspose1d with the listed arguments at a
fixed seed (PyTorch's default initialisation for weight and bias), runs it in float32 on a
random input, and saves x, weight, bias (when present) and output as .npy files. cases.json
lists every case's op, arguments and files.

    /usr/bin/python3 tests/tools/make_torch_cases.py [--out data/fixtures/torch]

Rerunning it reproduces the same files on the same PyTorch version (the version is recorded).
"""

import argparse
import json
import pathlib

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (name, op, constructor arguments, input shape); a two-element input shape is PyTorch's
# unbatched (channels, frames) input.
CONV = "conv1d"
TRANSPOSE = "conv_transpose1d"


def conv(name, shape, **args):
    return (name, CONV, args, shape)


def transpose(name, shape, **args):
    return (name, TRANSPOSE, args, shape)


CASES = [
    conv("conv_basic", (1, 1, 16), in_channels=1, out_channels=1, kernel_size=3),
    conv("conv_stride2_pad1", (2, 2, 33), in_channels=2, out_channels=3, kernel_size=4,
         stride=2, padding=1),
    conv("conv_kernel_longer_than_input", (1, 2, 5), in_channels=2, out_channels=2,
         kernel_size=7, padding=3),
    conv("conv_dilation2", (2, 2, 40), in_channels=2, out_channels=3, kernel_size=3,
         padding=2, dilation=2),
    conv("conv_dilation3_stride2", (1, 3, 50), in_channels=3, out_channels=4, kernel_size=4,
         stride=2, padding=1, dilation=3),
    conv("conv_groups2", (2, 4, 30), in_channels=4, out_channels=6, kernel_size=3, padding=1,
         groups=2),
    conv("conv_depthwise", (1, 8, 40), in_channels=8, out_channels=8, kernel_size=5,
         padding=2, groups=8),
    conv("conv_depthwise_multiplier", (2, 4, 25), in_channels=4, out_channels=12,
         kernel_size=3, stride=2, groups=4),
    conv("conv_same_odd_total", (1, 3, 21), in_channels=3, out_channels=2, kernel_size=4,
         padding="same"),
    conv("conv_same_dilated_reflect", (2, 2, 17), in_channels=2, out_channels=2,
         kernel_size=2, padding="same", dilation=3, padding_mode="reflect"),
    conv("conv_same_circular", (1, 2, 19), in_channels=2, out_channels=3, kernel_size=5,
         padding="same", dilation=2, padding_mode="circular"),
    conv("conv_same_replicate_even", (1, 1, 12), in_channels=1, out_channels=2, kernel_size=6,
         padding="same", padding_mode="replicate"),
    conv("conv_valid", (2, 3, 20), in_channels=3, out_channels=2, kernel_size=5,
         padding="valid"),
    conv("conv_reflect_stride2", (1, 2, 10), in_channels=2, out_channels=2, kernel_size=3,
         stride=2, padding=3, padding_mode="reflect"),
    conv("conv_reflect_limit", (2, 1, 5), in_channels=1, out_channels=2, kernel_size=3,
         padding=4, padding_mode="reflect"),
    conv("conv_replicate_long_pad", (1, 2, 3), in_channels=2, out_channels=1, kernel_size=4,
         padding=5, padding_mode="replicate"),
    conv("conv_circular_limit", (1, 2, 4), in_channels=2, out_channels=2, kernel_size=3,
         padding=4, padding_mode="circular"),
    conv("conv_circular_grouped", (2, 4, 23), in_channels=4, out_channels=4, kernel_size=3,
         stride=3, padding=2, dilation=2, groups=2, padding_mode="circular"),
    conv("conv_no_bias", (1, 3, 18), in_channels=3, out_channels=5, kernel_size=3, padding=1,
         bias=False),
    conv("conv_pointwise_strided", (2, 16, 31), in_channels=16, out_channels=8, kernel_size=1,
         stride=3),
    conv("conv_stride_over_kernel", (1, 2, 41), in_channels=2, out_channels=3, kernel_size=2,
         stride=5),
    conv("conv_unbatched", (3, 20), in_channels=3, out_channels=4, kernel_size=3, padding=1),
    conv("conv_encoder", (1, 1, 256), in_channels=1, out_channels=32, kernel_size=16, stride=8,
         padding=4),
    conv("conv_wide_k3", (1, 32, 100), in_channels=32, out_channels=48, kernel_size=3,
         padding=1),
    conv("conv_batch3", (3, 4, 16), in_channels=4, out_channels=4, kernel_size=3,
         padding="same", padding_mode="reflect"),
    transpose("tconv_basic", (1, 1, 16), in_channels=1, out_channels=1, kernel_size=3),
    transpose("tconv_stride2_pad1", (2, 2, 20), in_channels=2, out_channels=3, kernel_size=4,
              stride=2, padding=1),
    transpose("tconv_output_padding", (1, 1, 3), in_channels=1, out_channels=1, kernel_size=3,
              stride=2, padding=1, output_padding=1),
    transpose("tconv_output_padding_stride_limit", (2, 2, 12), in_channels=2, out_channels=3,
              kernel_size=8, stride=4, padding=2, output_padding=3),
    transpose("tconv_output_padding_dilation_limit", (1, 3, 15), in_channels=3,
              out_channels=2, kernel_size=3, stride=1, padding=1, output_padding=2,
              dilation=3),
    transpose("tconv_dilation2_stride3", (2, 2, 14), in_channels=2, out_channels=3,
              kernel_size=3, stride=3, padding=2, dilation=2),
    transpose("tconv_groups2", (1, 4, 20), in_channels=4, out_channels=6, kernel_size=3,
              stride=2, padding=1, groups=2),
    transpose("tconv_depthwise", (2, 8, 18), in_channels=8, out_channels=8, kernel_size=5,
              stride=2, padding=2, output_padding=1, groups=8),
    transpose("tconv_multiplier", (1, 4, 16), in_channels=4, out_channels=12, kernel_size=4,
              stride=2, padding=1, groups=4),
    transpose("tconv_no_bias", (1, 3, 12), in_channels=3, out_channels=2, kernel_size=3,
              bias=False),
    transpose("tconv_kernel1_stride3", (2, 4, 10), in_channels=4, out_channels=6,
              kernel_size=1, stride=3, padding=1, output_padding=2),
    transpose("tconv_stride_over_kernel", (1, 2, 9), in_channels=2, out_channels=2,
              kernel_size=2, stride=5),
    transpose("tconv_heavy_trim", (1, 2, 9), in_channels=2, out_channels=2, kernel_size=8,
              stride=4, padding=6),
    transpose("tconv_unbatched", (3, 12), in_channels=3, out_channels=2, kernel_size=4,
              stride=2, padding=1),
    transpose("tconv_decoder", (1, 32, 40), in_channels=32, out_channels=1, kernel_size=16,
              stride=8, padding=4),
    transpose("tconv_batch3", (3, 16, 20), in_channels=16, out_channels=16, kernel_size=3,
              padding=1),
    transpose("tconv_wide_k3", (1, 48, 60), in_channels=48, out_channels=32, kernel_size=3,
              padding=1),
]

CONV_DEFAULTS = dict(stride=1, padding=0, dilation=1, groups=1, bias=True,
                     padding_mode="zeros")
TRANSPOSE_DEFAULTS = dict(stride=1, padding=0, output_padding=0, groups=1, bias=True,
                          dilation=1)


def save(out_dir, file_name, tensor):
    np.save(out_dir / file_name, tensor.detach().numpy().astype(np.float32))
    return file_name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "data/fixtures/torch")
    args = parser.parse_args()
    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.npy"):
        old.unlink()

    torch.use_deterministic_algorithms(True)
    listed = []
    for index, (name, op, ctor_args, shape) in enumerate(CASES):
        full = dict(CONV_DEFAULTS if op == CONV else TRANSPOSE_DEFAULTS)
        full.update(ctor_args)
        torch.manual_seed(1000 + index)
        layer_type = torch.nn.Conv1d if op == CONV else torch.nn.ConvTranspose1d
        layer = layer_type(**full).float()
        x = torch.randn(*shape, dtype=torch.float32)
        with torch.no_grad():
            y = layer(x)
        files = {
            "x": save(out_dir, f"{name}_x.npy", x),
            "weight": save(out_dir, f"{name}_weight.npy", layer.weight),
            "output": save(out_dir, f"{name}_output.npy", y),
        }
        if layer.bias is not None:
            files["bias"] = save(out_dir, f"{name}_bias.npy", layer.bias)
        listed.append({"name": name, "op": op, "args": full, "input_shape": list(shape),
                       "output_shape": list(y.shape), "files": files})

    manifest = {
        "generator": "tests/tools/make_torch_cases.py",
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "cases": listed,
    }
    (out_dir / "cases.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out_dir.iterdir())
    print(f"{len(listed)} cases, {total} bytes in {out_dir}")


if __name__ == "__main__":
    main()
