#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: the Release build (with the CUDA
# backend when nvcc is present; CUDA tests skip without a GPU), the consumer-project test, an
# AddressSanitizer + UndefinedBehaviorSanitizer build, and the clang-format check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

echo "== format check"
git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror

echo "== release build"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build/release
ctest --test-dir build/release --output-on-failure -j 2

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONVBANK_SANITIZE=ON \
  -DCONVBANK_ENABLE_CUDA=OFF -DCONVBANK_INSTALL=OFF
cmake --build build/asan
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j 2
