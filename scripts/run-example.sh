#!/usr/bin/env bash
# The main job on the bundled example: installs the dependencies, builds convbank, and runs
# `convbank process` (the default job: a spectral-gate denoiser on an STFT filter bank) on the
# noisy recording in data/audio/, then prints the SNR against the clean recording before and
# after (data/make_recordings.sh made both, with pink noise at 5 dB SNR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release --target convbank_app
app=build/release/apps/convbank
mkdir -p out
"$app" process data/audio/speech_16k_mono_noisy.wav out/speech_16k_mono_denoised.wav
report=$("$app" snr --json data/audio/speech_16k_mono_clean.wav \
  data/audio/speech_16k_mono_noisy.wav out/speech_16k_mono_denoised.wav)
python3 - "$report" <<'PY' 2>/dev/null || echo "$report"
import json, sys
r = json.loads(sys.argv[1])["results"]
before, after = r[0]["snr_db"], r[1]["snr_db"]
print(f"SNR against the clean recording: noisy {before:.2f} dB, denoised {after:.2f} dB "
      f"(improvement {after - before:+.2f} dB)")
PY
