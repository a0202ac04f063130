#!/usr/bin/python3
"""Reference outputs for the computed filter banks, for tests/test_presets.cpp.

Every reference comes from an implementation that shares no code with convbank:

- stft:      torch.stft / torch.istft (float64) of a random signal, with torch's periodic windows;
- mel:       torchaudio.functional.melscale_fbanks (htk, norm=None), run in float64;
- param_sinc: a NumPy transcription of asteroid-filterbanks' ParamSincFB initialisation
             (asteroid itself is not installed here);
- gammatone: scipy.signal.gammatone(f, "fir", numtaps, fs) at ERB-rate spaced centre frequencies;
- analytic:  scipy.signal.hilbert(filters).imag;
- pinv:      numpy.linalg.pinv(W).T * stride / K.

Inputs that convbank reads back (signals, random banks) are rounded to float32 *before* the
reference is computed, so the reference describes exactly the float32 data the C++ test sees.
manifest.json lists every case, its options and its files; scalars that need full precision
(centre frequencies) live in the manifest as JSON numbers.

    /usr/bin/python3 tests/tools/make_preset_refs.py [--out data/fixtures/presets]
"""

import argparse
import json
import math
import pathlib

import numpy as np
import scipy
import scipy.signal
import torch
import torchaudio

ROOT = pathlib.Path(__file__).resolve().parents[2]

WINDOWS = {
    "hann": lambda n: torch.hann_window(n, periodic=True, dtype=torch.float64),
    "sqrt_hann": lambda n: torch.hann_window(n, periodic=True, dtype=torch.float64).sqrt(),
    "hamming": lambda n: torch.hamming_window(n, periodic=True, dtype=torch.float64),
    "blackman": lambda n: torch.blackman_window(n, periodic=True, dtype=torch.float64),
    "rect": lambda n: torch.ones(n, dtype=torch.float64),
}


class Writer:
    def __init__(self, out):
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        for old in self.out.glob("*.npy"):
            old.unlink()

    def save(self, name, array):
        file = name + ".npy"
        np.save(self.out / file, np.ascontiguousarray(array, dtype=np.float32))
        return file


def random_f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------------------
# STFT

STFT_ANALYSIS = [
    # (n_fft, hop, window, center)
    (512, 128, "hann", True),
    (512, 128, "hann", False),
    (400, 160, "hamming", False),
    (400, 100, "hamming", True),
    (255, 64, "blackman", True),
    (257, 100, "blackman", False),
    (16, 4, "sqrt_hann", True),
    (33, 11, "sqrt_hann", False),
    (64, 64, "rect", False),
    (63, 20, "rect", True),
    (1024, 256, "hann", True),
    (2, 1, "rect", True),
]

# torch.istft refuses center=False with windows that vanish at tap 0 (its NOLA check covers the
# edges), so every synthesis case is centred.
STFT_SYNTHESIS = [
    (512, 128, "hann"),
    (512, 256, "sqrt_hann"),
    (400, 100, "hamming"),
    (256, 64, "blackman"),
    (255, 85, "hann"),
    (300, 128, "hamming"),  # hop does not divide n_fft
    (64, 32, "rect"),
]


def stft_case(w, rng, name, frames, n_fft, hop, window, center=True, pad_mode="constant"):
    x = random_f32(rng, frames)
    spec = torch.stft(torch.from_numpy(x.astype(np.float64)), n_fft, hop,
                      window=WINDOWS[window](n_fft), center=center, pad_mode=pad_mode,
                      return_complex=True)
    ref = torch.cat([spec.real, spec.imag], dim=0).numpy()
    case = {"name": name, "n_fft": n_fft, "hop": hop, "window": window}
    if pad_mode == "constant":
        case["center"] = center
    else:
        case["pad_mode"] = pad_mode
    case["x"] = w.save(name + "_x", x)
    case["spec"] = w.save(name + "_spec", ref)
    return case


def stft_cases(w, rng):
    return [stft_case(w, rng, f"stft_{n_fft}_{hop}_{window}_{'c' if center else 'nc'}", 2000,
                      n_fft, hop, window, center)
            for n_fft, hop, window, center in STFT_ANALYSIS]


# torch.stft's other pad modes (its default is reflect), for the stft preset's pad_mode key:
# (n_fft, hop, window, pad_mode).
STFT_PAD_MODES = [
    (512, 128, "hann", "reflect"),
    (400, 100, "hamming", "reflect"),
    (63, 20, "rect", "reflect"),
    (256, 64, "sqrt_hann", "replicate"),
    (33, 11, "blackman", "replicate"),
]


def stft_pad_mode_cases(w, rng):
    return [stft_case(w, rng, f"stft_{n_fft}_{hop}_{window}_{pad_mode}", 3001, n_fft, hop, window,
                      pad_mode=pad_mode)
            for n_fft, hop, window, pad_mode in STFT_PAD_MODES]


def istft_cases(w, rng):
    cases = []
    for n_fft, hop, window in STFT_SYNTHESIS:
        x = random_f32(rng, 4000)
        xt = torch.from_numpy(x.astype(np.float64))
        win = WINDOWS[window](n_fft)
        spec = torch.stft(xt, n_fft, hop, window=win, center=True, pad_mode="constant",
                          return_complex=True)
        y = torch.istft(spec, n_fft, hop, window=win, center=True, length=x.shape[0]).numpy()
        name = f"istft_{n_fft}_{hop}_{window}"
        cases.append({"name": name, "n_fft": n_fft, "hop": hop, "window": window,
                      "center": True, "x": w.save(name + "_x", x),
                      "istft": w.save(name + "_istft", y)})
    return cases


# ------------------------------------------------------------------------------------------
# Mel

MEL = [
    # (n_filters, n_fft, sample_rate, f_min, f_max); f_max 0 means sample_rate / 2
    (40, 512, 16000.0, 0.0, 0.0),
    (80, 1024, 22050.0, 20.0, 8000.0),
    (128, 1024, 44100.0, 30.0, 0.0),
    (23, 400, 16000.0, 100.0, 7600.0),
    (10, 255, 8000.0, 50.0, 3900.0),
]


def mel_cases(w):
    cases = []
    torch.set_default_dtype(torch.float64)  # melscale_fbanks builds its grids in the default dtype
    try:
        for n_filters, n_fft, sr, f_min, f_max in MEL:
            top = sr / 2 if f_max == 0 else f_max
            fb = torchaudio.functional.melscale_fbanks(n_fft // 2 + 1, f_min, top, n_filters, sr,
                                                       norm=None, mel_scale="htk")
            assert fb.dtype == torch.float64
            name = f"mel_{n_filters}_{n_fft}_{int(sr)}"
            cases.append({"name": name, "n_filters": n_filters, "n_fft": n_fft,
                          "sample_rate": sr, "f_min": f_min, "f_max": f_max,
                          "fbanks": w.save(name + "_fbanks", fb.numpy())})
    finally:
        torch.set_default_dtype(torch.float32)
    return cases


# ------------------------------------------------------------------------------------------
# ParamSincFB (asteroid-filterbanks), transcribed to NumPy float64


def asteroid_param_sinc(n_filters, kernel_size, sample_rate, min_low_hz, min_band_hz):
    if kernel_size % 2 == 0:
        kernel_size += 1
    half_kernel = kernel_size // 2

    def to_mel(hz):
        return 2595 * np.log10(1 + hz / 700)

    def to_hz(mel):
        return 700 * (10 ** (mel / 2595) - 1)

    low_hz = 30
    high_hz = sample_rate / 2 - (min_low_hz + min_band_hz)
    mel = np.linspace(to_mel(low_hz), to_mel(high_hz), n_filters // 2 + 1)
    hz = to_hz(mel)
    low_hz_ = hz[:-1].reshape(-1, 1)
    band_hz_ = np.diff(hz).reshape(-1, 1)

    window_ = np.hamming(kernel_size)[:half_kernel]
    n_ = 2 * np.pi * (np.arange(-half_kernel, 0.0).reshape(1, -1) / sample_rate)

    low = min_low_hz + np.abs(low_hz_)
    high = np.clip(low + min_band_hz + np.abs(band_hz_), min_low_hz, sample_rate / 2)
    band = (high - low)[:, 0]
    ft_low = low @ n_
    ft_high = high @ n_

    bp_left = ((np.sin(ft_high) - np.sin(ft_low)) / (n_ / 2)) * window_
    bp_center = 2 * band.reshape(-1, 1)
    cos_f = np.concatenate([bp_left, bp_center, np.flip(bp_left, axis=1)], axis=1)
    cos_f = cos_f / (2 * band[:, None])

    bp_left = ((np.cos(ft_low) - np.cos(ft_high)) / (n_ / 2)) * window_
    bp_center = np.zeros_like(band.reshape(-1, 1))
    sin_f = np.concatenate([bp_left, bp_center, -np.flip(bp_left, axis=1)], axis=1)
    sin_f = sin_f / (2 * band[:, None])

    return np.concatenate([cos_f, sin_f], axis=0).reshape(n_filters // 2 * 2, 1, kernel_size)


PARAM_SINC = [
    # (n_filters, kernel_size, sample_rate, min_low_hz, min_band_hz)
    (64, 251, 16000.0, 50.0, 50.0),
    (80, 250, 16000.0, 50.0, 50.0),  # even kernel -> 251
    (2, 1, 8000.0, 50.0, 50.0),
    (32, 129, 44100.0, 30.0, 100.0),
    (10, 64, 8000.0, 0.0, 20.0),
]


def param_sinc_cases(w):
    cases = []
    for n_filters, kernel_size, sr, min_low, min_band in PARAM_SINC:
        f = asteroid_param_sinc(n_filters, kernel_size, sr, min_low, min_band)
        name = f"param_sinc_{n_filters}_{kernel_size}_{int(sr)}"
        cases.append({"name": name, "n_filters": n_filters, "kernel_size": kernel_size,
                      "sample_rate": sr, "min_low_hz": min_low, "min_band_hz": min_band,
                      "filters": w.save(name + "_filters", f)})
    return cases


# ------------------------------------------------------------------------------------------
# Gammatone

GAMMATONE = [
    # (n_filters, kernel_size, sample_rate, f_min, f_max); f_max 0 means 0.9 * sample_rate / 2
    (32, 512, 16000.0, 50.0, 0.0),
    (64, 400, 22050.0, 100.0, 8000.0),
    (1, 100, 8000.0, 440.0, 1000.0),
    (16, 33, 44100.0, 20.0, 20000.0),
]


def erb_rate(f):
    return 21.4 * np.log10(1 + 0.00437 * f)


def erb_rate_to_hz(e):
    return (10 ** (e / 21.4) - 1) / 0.00437


def gammatone_cases(w):
    cases = []
    for n_filters, kernel_size, sr, f_min, f_max in GAMMATONE:
        top = 0.9 * sr / 2 if f_max == 0 else f_max
        centres = erb_rate_to_hz(np.linspace(erb_rate(f_min), erb_rate(top), n_filters))
        filters = np.stack([scipy.signal.gammatone(f, "fir", numtaps=kernel_size, fs=sr)[0]
                            for f in centres]).reshape(n_filters, 1, kernel_size)
        name = f"gammatone_{n_filters}_{kernel_size}_{int(sr)}"
        cases.append({"name": name, "n_filters": n_filters, "kernel_size": kernel_size,
                      "sample_rate": sr, "f_min": f_min, "f_max": f_max,
                      "center_frequencies": [float(c) for c in centres],
                      "filters": w.save(name + "_filters", filters)})
    return cases


# ------------------------------------------------------------------------------------------
# Analytic pairs and pseudo-inverses of random banks


def analytic_cases(w, rng):
    cases = []
    for n, c, k in [(8, 1, 64), (5, 2, 33), (3, 1, 2), (4, 1, 1), (16, 1, 251)]:
        f = random_f32(rng, n, c, k)
        h = scipy.signal.hilbert(f.astype(np.float64), axis=-1).imag
        name = f"analytic_{n}_{c}_{k}"
        cases.append({"name": name, "filters": w.save(name + "_filters", f),
                      "hilbert": w.save(name + "_hilbert", h)})
    return cases


def stft_matrix(n_fft, window):
    # The windowed DFT rows, written from the definition (real parts, then imaginary parts).
    win = WINDOWS[window](n_fft).numpy()
    k = np.arange(n_fft // 2 + 1)[:, None]
    n = np.arange(n_fft)[None, :]
    angle = 2 * np.pi * ((k * n) % n_fft) / n_fft
    return np.concatenate([np.cos(angle) * win, -np.sin(angle) * win], axis=0)


def pinv_cases(w, rng):
    cases = []
    banks = [("random_64x32", random_f32(rng, 64, 32), 16),
             ("random_40x40", random_f32(rng, 40, 40), 10),
             ("random_16x32_wide", random_f32(rng, 16, 32), 8),
             ("random_100x48", random_f32(rng, 100, 48), 48),
             ("stft_64_hamming", stft_matrix(64, "hamming").astype(np.float32), 16),
             ("stft_63_hann", stft_matrix(63, "hann").astype(np.float32), 7)]
    for label, bank, stride in banks:
        k = bank.shape[1]
        ref = np.linalg.pinv(bank.astype(np.float64)).T * stride / k
        name = f"pinv_{label}"
        cases.append({"name": name, "stride": stride,
                      "analysis": w.save(name + "_analysis", bank.reshape(bank.shape[0], 1, k)),
                      "synthesis": w.save(name + "_synthesis", ref.reshape(ref.shape[0], 1, k))})
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "data/fixtures/presets")
    args = parser.parse_args()

    w = Writer(args.out)
    rng = np.random.default_rng(20240611)
    manifest = {
        "generator": "tests/tools/make_preset_refs.py",
        "torch_version": torch.__version__,
        "torchaudio_version": torchaudio.__version__,
        "scipy_version": scipy.__version__,
        "numpy_version": np.__version__,
        "stft": stft_cases(w, rng),
        "istft": istft_cases(w, rng),
        "mel": mel_cases(w),
        "param_sinc": param_sinc_cases(w),
        "gammatone": gammatone_cases(w),
        "analytic": analytic_cases(w, rng),
        "pinv": pinv_cases(w, rng),
        # Last, so that the cases above keep their random draws.
        "stft_pad_mode": stft_pad_mode_cases(w, rng),
    }
    with open(args.out / "manifest.json", "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    count = sum(len(v) for v in manifest.values() if isinstance(v, list))
    print(f"wrote {count} cases to {args.out}")


if __name__ == "__main__":
    main()
