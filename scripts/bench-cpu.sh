#!/usr/bin/env bash
# CPU benchmark against PyTorch, side by side in one run (installs PyTorch from Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --bench
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release --target convbank_app
/usr/bin/python3 scripts/bench_cpu.py build/release "$@"
