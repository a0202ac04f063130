#!/usr/bin/python3
"""Makes data/example/: a short two-channel test signal, a learned-encoder-like filter bank
(64 filters, kernel 16, stride 8, as Conv-TasNet's encoder) and the PyTorch output the README's
example compares against. Run with Debian's python3-torch: /usr/bin/python3 data/make_example.py
"""
import os

import numpy as np
import torch

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "example")
os.makedirs(here, exist_ok=True)
torch.manual_seed(2026)

sr = 16000
t = np.arange(sr) / sr
left = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 3000 * t)
right = 0.4 * np.sin(2 * np.pi * (200 + 1800 * t) * t)  # a chirp
signal = np.stack([left, right]).astype(np.float32)[:, None, :]  # (batch=2, 1, 16000)

encoder = torch.nn.Conv1d(1, 64, 16, stride=8, bias=False)
with torch.no_grad():
    features = encoder(torch.from_numpy(signal))

np.save(os.path.join(here, "signal.npy"), signal)
np.save(os.path.join(here, "encoder_weight.npy"), encoder.weight.detach().numpy())
np.save(os.path.join(here, "features_torch.npy"), features.numpy())
print("wrote", here, "signal", signal.shape, "features", tuple(features.shape))
