#!/usr/bin/env bash
# The pointwise tensor-core kernel (conv_pointwise_wgmma.cu) on the lent H200, one call: builds
# the working tree, runs its sanitize case with 3 and 2 consumer warpgroups (TEST_WG), ROUNDS
# interleaved rounds of `convbank-bench-cuda --no-cudnn` on pointwise shapes for each of VARIANTS
# (default: the kernel, CONVBANK_CUDA_PW=1; the same with one column tile per block tile,
# CONVBANK_CUDA_PW_WIDE=0; the shared-memory-operand kernel, CONVBANK_CUDA_PW=0), tcn_pointwise
# and x_pw_odd against cuDNN, the doctest CASES (its case and the NaN/Inf, dynamic-range and
# all-positive families), then memcheck and racecheck on its case, within DEADLINE seconds.
# Prints a table, shape x variant, ms per round; logs go to $OUT.
#
#   OUT=$OUT ROUNDS=2 scripts/gpu-pw.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
CASE='cuda:sanitize pointwise tensor-core*'
CASES=${CASES:-"$CASE,cuda:sanitize NaN/Inf*,cuda: inputs and weights*,cuda: all-positive*"}

gpu_build build-pw

for wg in ${TEST_WG:-3 2}; do
  stamp "the pointwise sanitize case, $wg consumer warpgroups"
  CONVBANK_CUDA_PW_WG=$wg timeout 120 "$TESTS" --test-case="$CASE" >"$OUT/pw-test-$wg.log" 2>&1 &&
    stamp "ok" || stamp "FAILED"
  grep -E "pointwise|ERROR|test cases" "$OUT/pw-test-$wg.log" | head -30
done

shapes=(
  "16,512,128,16384,1,1,0,1,1"
  "16,512,128,16383,1,1,0,1,1"
  "8,256,256,16384,1,1,0,1,1"
  "16,256,128,16384,1,1,0,1,1"
  "4,512,512,16384,1,1,0,1,1"
  "2,1024,256,16384,1,1,0,1,1"
  "8,192,256,16384,1,1,0,1,1"
  "16,128,256,16384,1,1,0,1,1"
  "8,128,128,32768,1,1,0,1,1"
  "16,64,256,16384,1,1,0,1,1"
  "8,64,128,65536,1,1,0,1,1"
  "8,128,64,65536,1,1,0,1,1"
  "16,512,100,16384,1,1,0,1,1"
  "2,384,384,8192,1,1,0,1,1"
)
args=(--no-cudnn --runs 30 --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
VARIANTS=${VARIANTS:-"pw:CONVBANK_CUDA_PW=1 narrow:CONVBANK_CUDA_PW=1,CONVBANK_CUDA_PW_WIDE=0 ss:CONVBANK_CUDA_PW=0"}
read -r -a variants <<<"$VARIANTS"
ab_rounds pointwise "" "${args[@]}"

stamp "tcn_pointwise and x_pw_odd against cuDNN, default dispatch"
"$BENCH" --runs 30 --workload tcn_pointwise --workload x_pw_odd >"$OUT/cudnn.md" 2>&1
grep -E "^\| (tcn_pointwise|x_pw_odd)" "$OUT/cudnn.md" | cut -d'|' -f2-14

stamp "doctest: $CASES"
timeout "$(budget 200)" "$TESTS" --test-case="$CASES" >"$OUT/tests.log" 2>&1 && stamp "tests ok" ||
  stamp "tests FAILED"
grep -E "pointwise|non-finite check|dynamic-range check|ERROR|FAILED|test cases" \
  "$OUT/tests.log" | tail -30

sanitize_case "$CASE"
stamp "done"
