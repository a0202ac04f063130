#!/usr/bin/env bash
# The local-order FFMA encoder (conv1d_encoder_local_ffma, conv_memory.cu) on the lent H200, one
# call: builds the working tree, runs its sanitize case with each of VARIANTS' settings, ROUNDS
# interleaved rounds of `convbank-bench-cuda --no-cudnn` on one-channel encoder shapes for each of
# VARIANTS (default: line-aligned stores, and CONVBANK_CUDA_ENC_LOCAL_LINES=0), enc_tasnet against
# cuDNN, the doctest CASES, then memcheck and racecheck on its case, within DEADLINE seconds.
# Prints a table, shape x variant, ms per round; logs go to $OUT.
#
#   OUT=$OUT ROUNDS=2 scripts/gpu-enc-local.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
CASE='cuda:sanitize local-order encoder*'
CASES=${CASES:-"cuda:sanitize NaN/Inf*,cuda: inputs and weights*,cuda: all-positive*,cuda: memory-bound*,cuda: 64-bit*"}
VARIANTS=${VARIANTS:-"lines: plain:CONVBANK_CUDA_ENC_LOCAL_LINES=0"}
read -r -a variants <<<"$VARIANTS"

gpu_build build-enc-local

for v in "${variants[@]}"; do
  stamp "the local-order encoder's sanitize case, $v"
  IFS=, read -r -a envs <<<"${v#*:}"
  env "${envs[@]}" timeout 120 "$TESTS" --test-case="$CASE" >"$OUT/enc-test-${v%%:*}.log" 2>&1 &&
    stamp "ok" || stamp "FAILED"
  grep -E "local-order encoder:|ERROR|test cases" "$OUT/enc-test-${v%%:*}.log" | head -10
done

# enc_tasnet, the same on rows of 16384 frames (each row on a line boundary), and the shapes the
# local-order encoder takes by default.
shapes=(
  "16,1,512,131080,16,8,0,1,1"
  "4,1,1024,131072,16,8,0,1,1"
  "8,1,512,160003,20,10,0,1,1"
  "8,1,512,131072,12,6,0,1,1"
  "8,1,128,131072,3,1,1,1,1"
  "16,1,256,131072,32,16,0,1,1"
  "16,1,64,131071,16,8,3,1,1"
  "4,1,64,65536,5,1,2,1,1"
)
args=(--no-cudnn --runs 30 --workload enc_tasnet --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
ab_rounds "local-order encoder" conv1d_encoder_ "${args[@]}"

stamp "enc_tasnet against cuDNN, default dispatch"
"$BENCH" --runs 30 --workload enc_tasnet >"$OUT/cudnn.md" 2>&1
grep -E "^\| enc_tasnet" "$OUT/cudnn.md" | cut -d'|' -f2-14

stamp "doctest: $CASES"
timeout "$(budget 200)" "$TESTS" --test-case="$CASES" >"$OUT/tests.log" 2>&1 && stamp "tests ok" ||
  stamp "tests FAILED"
grep -E "ERROR|FAILED|test cases" "$OUT/tests.log" | tail -20

sanitize_case "$CASE"
stamp "done"
