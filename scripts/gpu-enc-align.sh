#!/usr/bin/env bash
# The local-order encoder's aligned channel tiles (CONVBANK_CUDA_ENC_LOCAL_ALIGN: 1 none, 8 the
# default, 32 whole lines where that keeps the tile count, else none) on the lent H200, one call: builds the working tree, runs the encoder's
# doctest cases (CASES), then ROUNDS interleaved rounds of `convbank-bench-cuda --no-cudnn` on
# one-channel encoder shapes for each alignment, and enc_tasnet against cuDNN, within DEADLINE
# seconds. Prints a table, shape x variant, ms per round, and writes the logs to $OUT.
#
#   OUT=$OUT ROUNDS=2 scripts/gpu-enc-align.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
ALIGNS=${ALIGNS:-"1 0 32"}
CASES=${CASES:-"cuda:sanitize local-order*,cuda: memory-bound*,cuda:sanitize NaN/Inf*,cuda: inputs and weights*,cuda: 64-bit*"}

gpu_build build-enc

stamp "doctest: $CASES"
timeout "$(budget 150)" "$TESTS" --test-case="$CASES" >"$OUT/tests.log" 2>&1 && echo ok || echo FAILED
grep -E "local-order encoder:|ERROR|test cases" "$OUT/tests.log" | cut -c1-200 | head -12

shapes=(
  "16,1,512,131080,16,8,0,1,1"
  "4,1,1024,131072,16,8,0,1,1"
  "8,1,512,160003,20,10,0,1,1"
  "16,1,512,131064,16,8,0,1,1"
  "16,1,512,131056,16,8,0,1,1"
  "8,1,128,131072,3,1,1,1,1"
)
args=(--no-cudnn --runs 30 --workload enc_tasnet --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
variants=()
for al in $ALIGNS; do variants+=("a$al:CONVBANK_CUDA_ENC_LOCAL_ALIGN=$al"); done
ab_rounds "encoders, aligned channel tiles" conv1d_encoder_ "${args[@]}"

stamp "enc_tasnet against cuDNN"
timeout "$(budget 60)" "$BENCH" --runs 30 --call-times --workload enc_tasnet 2>/dev/null |
  grep -E '^\| [a-z]' | cut -d'|' -f2-12
stamp "done"
