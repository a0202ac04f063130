#!/usr/bin/python3
"""Writes data/model/tasnet_small.safetensors (+ .npy copies): a small Conv-TasNet-style
encoder/decoder state_dict, shaped like one trained in PyTorch, for examples and tests.

    /usr/bin/python3 data/make_model.py

Tensors (float32, PyTorch layouts, so they load into nn.Conv1d / nn.ConvTranspose1d as is):
    encoder.weight  (64, 1, 16)  Conv1d(1, 64, kernel_size=16, stride=8, bias=False)
    decoder.weight  (64, 1, 16)  ConvTranspose1d(64, 1, kernel_size=16, stride=8, bias=False)

The decoder is the encoder's scaled pseudo-inverse, so decode(encode(x)) == x away from the
first and last K - stride samples (where only one frame covers a sample); the script checks
this with torch and prints the reconstruction SNR.

The safetensors file is written by hand (the `safetensors` package is not a dependency):
8-byte little-endian header length, a JSON header, then the raw little-endian tensor bytes.
"""
import json
import os
import struct
import sys

import numpy as np

CHANNELS, KERNEL, STRIDE = 64, 16, 8
SEED = 20240
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "model")


def encoder_weight():
    # "Trained-style": learned TasNet encoders look like windowed band-pass filters with
    # irregular frequencies and phases, plus some unstructured residue. Built from that, with a
    # fixed seed; the sine window has no zero end-points, so the bank stays full rank
    # (well conditioned pseudo-inverse).
    rng = np.random.RandomState(SEED)
    k = np.arange(KERNEL) + 0.5
    window = np.sin(np.pi * k / KERNEL)
    freqs = np.sort(rng.uniform(0.0, 0.5, CHANNELS))  # cycles per sample, up to Nyquist
    phases = rng.uniform(0.0, 2 * np.pi, CHANNELS)
    w = window * np.cos(2 * np.pi * freqs[:, None] * k + phases[:, None])
    w += 0.1 * rng.standard_normal((CHANNELS, KERNEL))
    w /= np.linalg.norm(w, axis=1, keepdims=True)  # unit-norm filters, as weight norm gives
    return w.astype(np.float32)


def decoder_weight(enc):
    # Every sample away from the edges lies in KERNEL / STRIDE frames; each frame gives back
    # pinv(W) @ W @ x = x, so scaling by STRIDE / KERNEL makes the overlap-add sum exactly x.
    w = enc.reshape(CHANNELS, KERNEL).astype(np.float64)
    # pinv(w).T is a Fortran-ordered view; .npy readers that take C order only need a copy.
    return np.ascontiguousarray((np.linalg.pinv(w).T * STRIDE / KERNEL).astype(np.float32))


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # The reference writer pads the header with spaces to a multiple of 8 so that the tensor
    # data starts aligned; readers that map the file rely on it.
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    # Read back independently of the writer's bookkeeping, as a consumer would.
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32"
        b, e = entry["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(entry["shape"])
    return out, header.get("__metadata__", {})


def reconstruction_snr_db(enc, dec):
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.random.RandomState(SEED + 1).uniform(-1, 1, (2, 1, 16000))
                         .astype(np.float32))
    y = F.conv_transpose1d(F.conv1d(x, torch.from_numpy(enc), stride=STRIDE, padding=0),
                           torch.from_numpy(dec), stride=STRIDE, padding=0)
    # The first and last KERNEL - STRIDE samples lie in fewer frames: not reconstructed by design.
    edge = KERNEL - STRIDE
    ref = x[..., edge:x.shape[-1] - edge].double()
    got = y[..., edge:x.shape[-1] - edge].double()
    return float(10 * torch.log10((ref ** 2).sum() / ((got - ref) ** 2).sum()))


def main():
    enc = encoder_weight().reshape(CHANNELS, 1, KERNEL)
    dec = decoder_weight(enc).reshape(CHANNELS, 1, KERNEL)
    tensors = {"encoder.weight": enc, "decoder.weight": dec}
    metadata = {
        "format": "pt",
        "model": "tasnet_small encoder/decoder",
        "encoder": f"Conv1d(1, {CHANNELS}, kernel_size={KERNEL}, stride={STRIDE}, bias=False)",
        "decoder": f"ConvTranspose1d({CHANNELS}, 1, kernel_size={KERNEL}, stride={STRIDE}, "
                   "bias=False)",
        "generator": "data/make_model.py",
        # convbank checks audio against it: the filters were made for 16 kHz speech.
        "sample_rate": "16000",
    }
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "tasnet_small.safetensors")
    write_safetensors(path, tensors, metadata)
    for name, array in tensors.items():
        np.save(os.path.join(OUT, name + ".npy"), np.ascontiguousarray(array))

    loaded, _ = read_safetensors(path)
    for name, array in tensors.items():
        assert np.array_equal(loaded[name], array), name
        assert np.array_equal(np.load(os.path.join(OUT, name + ".npy")), array), name
    cond = np.linalg.cond(enc.reshape(CHANNELS, KERNEL).astype(np.float64))
    snr = reconstruction_snr_db(enc, dec)
    print(f"{path}: {os.path.getsize(path)} bytes, encoder condition number {cond:.2f}, "
          f"encode -> decode SNR away from the edges {snr:.1f} dB")
    if snr < 100:
        sys.exit(f"make_model.py: reconstruction SNR {snr:.1f} dB is below 100 dB")


if __name__ == "__main__":
    main()
