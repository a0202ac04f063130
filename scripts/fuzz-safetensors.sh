#!/usr/bin/env bash
# Fuzzes the safetensors reader with libFuzzer: builds tests/fuzz/fuzz_safetensors with clang-14
# and -fsanitize=fuzzer,address,undefined (the whole library instrumented, so coverage guides the
# search into the parser) in its own build directory, then runs it from the fixture files.
#
#   scripts/fuzz-safetensors.sh [seconds=180] [build dir=build/fuzz-safetensors]
#
# Crashes, leaks and timeouts are written to <build dir>/fuzz-artifacts/ (reproduce one with
# `<build dir>/tests/fuzz/fuzz_safetensors <file>`); the grown corpus stays in
# <build dir>/fuzz-corpus/ for the next run. Needs clang-14 and libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
build=${2:-build/fuzz-safetensors}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" \
  -DCONVBANK_SANITIZE=ON -DCONVBANK_ENABLE_CUDA=OFF -DCONVBANK_ENABLE_SNDFILE=OFF \
  -DCONVBANK_BUILD_APPS=OFF -DCONVBANK_INSTALL=OFF
cmake --build "$build" --target fuzz_safetensors

corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$corpus" "$artifacts"
cp data/fixtures/safetensors/*.safetensors "$corpus"/
# -max_len: the seeds are under 2 KiB; a few KiB leaves room to grow headers and buffers while
# keeping each execution cheap. -timeout catches hangs (a parse takes microseconds).
"$build/tests/fuzz/fuzz_safetensors" "$corpus" \
  -dict=tests/fuzz/safetensors.dict -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts/"
