#!/usr/bin/env bash
# Installs the dependencies, builds convbank and runs the bundled example: a Conv-TasNet-style
# encoder (64 filters, kernel 16, stride 8, trained-weights layout) over a two-channel signal,
# compared with PyTorch's output for the same weights (data/make_example.py made both).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release --target convbank_app
app=build/release/apps/convbank
mkdir -p out
"$app" conv1d --input data/example/signal.npy --weight data/example/encoder_weight.npy \
  --stride 8 --output out/features.npy
echo "convbank conv1d wrote out/features.npy; against PyTorch's output:"
"$app" compare out/features.npy data/example/features_torch.npy
