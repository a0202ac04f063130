#!/usr/bin/env bash
# Makes the example recordings under data/audio/: synthetic speech (espeak-ng), clean and with
# stationary pink noise at 5 dB SNR, mono and stereo, 16 kHz and 48 kHz, 16-bit PCM WAV, plus a
# FLAC copy of the 16 kHz stereo noisy file. See data/audio/README.md for what each file holds.
#
#   data/make_recordings.sh            # rewrites data/audio/*.wav, *.flac
#
# Needs espeak-ng, sox (with FLAC support) and a Python 3 with numpy ($PYTHON, default
# /usr/bin/python3). Output is byte-for-byte reproducible with the same tool versions (tested
# with espeak-ng 1.51, SoX 14.4.2, numpy 1.24): the noise comes from numpy's legacy
# RandomState, whose stream numpy guarantees not to change, because SoX's synth noise has no
# seed option; SoX dither is off (-D) since it is random too.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/audio"
python="${PYTHON:-/usr/bin/python3}"
for tool in espeak-ng sox "$python"; do
  command -v "$tool" >/dev/null || { echo "make_recordings.sh: $tool not found" >&2; exit 1; }
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

# Two sentences in two voices, so the stereo channels are clearly different signals (a
# channel mix-up in a test shows up as a large error, not a small one).
espeak-ng -v en-us -s 170 -w "$tmp/left_22k.wav" "The quick brown fox jumps over the lazy dog."
espeak-ng -v en-gb+f3 -s 170 -w "$tmp/right_22k.wav" "Filter banks split every sound into narrow bands."

for voice in left right; do
  for rate in 16000 48000; do
    # espeak-ng's leading and trailing silence differ per sentence; trimming it lets the
    # mixer below place both sentences at the same onset.
    sox -D "$tmp/${voice}_22k.wav" -t raw -e float -b 32 -L "$tmp/${voice}_${rate}.f32" \
      silence 1 0.02 0.5% reverse silence 1 0.02 0.5% reverse rate -v "$rate"
  done
done

# Mixing happens in numpy, on integer samples, so that the stored noisy file's SNR against the
# stored clean file is the documented value to within rounding, not just before quantization.
"$python" - "$tmp" <<'EOF'
import sys
import numpy as np

tmp = sys.argv[1]
SECONDS = 3.0
ONSET = 0.12         # speech starts after a short silence, as in a real recording
PEAK = 0.5           # clean speech peaks at -6 dBFS, so speech + noise never clips
SNR_DB = 5.0
FULL_SCALE = 32767.0

def speech(voice, rate):
    x = np.fromfile(f"{tmp}/{voice}_{rate}.f32", dtype="<f4").astype(np.float64)
    n = int(round(SECONDS * rate))
    start = int(round(ONSET * rate))
    assert start + len(x) <= n, f"{voice} sentence too long for {SECONDS} s at {rate} Hz"
    y = np.zeros(n)
    y[start:start + len(x)] = x
    return y

def pink_noise(n, rate, seed):
    # White Gaussian noise shaped by 1/sqrt(f) (power ~ 1/f) in the frequency domain; below
    # 20 Hz the shaping stops, since a recording chain passes no DC or sub-audio rumble.
    white = np.random.RandomState(seed).standard_normal(n)
    f = np.fft.rfftfreq(n, 1.0 / rate)
    gain = np.where(f < 20.0, 0.0, 1.0 / np.sqrt(np.maximum(f, 20.0)))
    pink = np.fft.irfft(np.fft.rfft(white) * gain, n)
    return pink / np.sqrt(np.mean(pink ** 2))

def snr_db(clean, noisy):
    return 10 * np.log10(np.sum(clean ** 2) / np.sum((noisy - clean) ** 2))

for rate in (16000, 48000):
    left = speech("left", rate)
    right = speech("right", rate)
    # One gain for both sentences keeps their natural level difference.
    scale = PEAK / max(np.abs(left).max(), np.abs(right).max())
    for layout, channels in (("mono", [left]), ("stereo", [left, right])):
        clean = np.stack([np.round(c * scale * FULL_SCALE) for c in channels])
        noisy = np.empty_like(clean)
        for ch in range(clean.shape[0]):
            # Independent noise per channel and per file (seed = rate + channel), at the same
            # SNR in every channel so the file's SNR over all channels is that value too.
            noise = pink_noise(clean.shape[1], rate, seed=rate + ch)
            gain = np.sqrt(np.sum(clean[ch] ** 2) / (10 ** (SNR_DB / 10) * np.sum(noise ** 2)))
            noisy[ch] = clean[ch] + np.round(gain * noise)
        assert np.abs(noisy).max() <= FULL_SCALE, "noisy mix clips"
        name = f"speech_{rate // 1000}k_{layout}"
        for kind, data in (("clean", clean), ("noisy", noisy)):
            # Interleaved little-endian int16, the layout sox reads as raw PCM.
            data.T.astype("<i2").tofile(f"{tmp}/{name}_{kind}.s16")
        print(f"{name}: {clean.shape[0]} ch, {clean.shape[1]} frames, "
              f"noisy vs clean SNR {snr_db(clean, noisy):.3f} dB, "
              f"noisy peak {np.abs(noisy).max() / 32768:.3f}")
EOF

for rate in 16000 48000; do
  for layout in mono stereo; do
    channels=1
    [ "$layout" = stereo ] && channels=2
    for kind in clean noisy; do
      name="speech_$((rate / 1000))k_${layout}_${kind}"
      sox -D -t raw -r "$rate" -e signed -b 16 -c "$channels" -L "$tmp/$name.s16" \
        -t wav -e signed -b 16 "$out/$name.wav"
    done
  done
done
sox -D "$out/speech_16k_stereo_noisy.wav" -t flac -C 8 "$out/speech_16k_stereo_noisy.flac"

ls -l "$out"
