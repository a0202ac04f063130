#!/usr/bin/env bash
# Installs what convbank needs to build and test on Debian 12 (as root; uses sudo otherwise).
# Optional extras: `--bench` adds PyTorch for scripts/bench-cpu.sh and the fixture script.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git clang-format
          libeigen3-dev doctest-dev libcli11-dev libsndfile1-dev nlohmann-json3-dev)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3 python3-numpy python3-torch)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
