#!/usr/bin/env bash
# The tensor-core encoder (conv_encoder_wgmma.cu) on the lent H200, one call: builds the working
# tree, runs the encoder's sanitize case, then ROUNDS interleaved rounds of `convbank-bench-cuda
# --no-cudnn` on one-channel encoder shapes for each variant (environment settings), enc_tasnet
# and dec_tasnet once against cuDNN, more CUDA doctest cases (CASES), and memcheck and racecheck
# on the encoder's case, within DEADLINE seconds. Prints a table, shape x variant, ms per round,
# and writes the logs to $OUT.
#
#   OUT=$OUT ROUNDS=2 scripts/gpu-enc-wgmma.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
CASES=${CASES:-"cuda:sanitize tensor-core encoder*,cuda:sanitize NaN/Inf*,cuda: inputs and weights*,cuda: all-positive*,cuda: memory-bound*,cuda: seed shapes and all GPU workloads*,cuda: 64-bit*,cuda:sanitize local-order*"}

gpu_build build-enc

stamp "the encoder's sanitize case"
timeout 120 "$TESTS" --test-case='cuda:sanitize tensor-core encoder*' >"$OUT/enc-test.log" 2>&1 &&
  stamp "ok" || stamp "FAILED"
grep -E "tensor-core encoder|ERROR|test cases" "$OUT/enc-test.log" | head -20

shapes=(
  "4,1,1024,131072,16,8,0,1,1"
  "8,1,512,160003,20,10,0,1,1"
  "8,1,512,131072,12,6,0,1,1"
  "8,1,128,131072,3,1,1,1,1"
  "16,1,256,131072,32,16,0,1,1"
  "16,1,64,131071,16,8,3,1,1"
  "16,1,512,131072,16,4,0,1,1"
  "4,1,64,65536,5,1,2,1,1"
  "8,1,256,131072,8,4,0,1,1"
)
args=(--no-cudnn --runs 30 --workload enc_tasnet --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
variants=(
  "ffma:CONVBANK_CUDA_ENC_WGMMA=0"
  "auto:"
  "tensor:CONVBANK_CUDA_ENC_WGMMA=1"
  "c512:CONVBANK_CUDA_ENC_WGMMA=1,CONVBANK_CUDA_ENC_WGMMA_CH=512"
  "c64:CONVBANK_CUDA_ENC_WGMMA=1,CONVBANK_CUDA_ENC_WGMMA_CH=64"
)
ab_rounds encoders conv1d_encoder_ "${args[@]}"

# 3xFP16 against 3xTF32 on the layers that take 3xFP16 by default (log: short-row
# depth-to-space decoders measured slower with it).
stamp "3xFP16 vs 3xTF32"
half_t=(8,512,256,512,16,8,4,1,1 8,256,128,4096,16,8,4,1,1 8,128,64,32768,4,2,1,1,1
  8,64,32,65536,4,2,1,1,1 8,512,256,410,16,8,4,1,1 8,256,128,3277,10,5,3,1,1
  8,128,64,16384,8,4,2,1,1 8,256,128,16384,3,2,1,1,1)
half_c=(8,32,64,131072,4,2,1,1,1 8,64,128,65536,8,4,2,1,1 8,128,256,16384,10,5,3,1,1
  8,256,512,3277,16,8,4,1,1 8,80,512,512,7,1,3,1,1)
for round in $(seq 1 "$ROUNDS"); do
  for v in half tf32; do
    envs=()
    [ $v = tf32 ] && envs=(CONVBANK_CUDA_SS_HALF=0)
    {
      a=(--no-cudnn --runs 30 --workload tcn_pointwise --workload up2x --workload x_up4x
        --workload x_pw_odd --op conv-transpose1d)
      for s in "${half_t[@]}"; do a+=(--shape "$s"); done
      env "${envs[@]}" "$BENCH" "${a[@]}" 2>/dev/null
      a=(--no-cudnn --runs 30 --op conv1d)
      for s in "${half_c[@]}"; do a+=(--shape "$s"); done
      env "${envs[@]}" "$BENCH" "${a[@]}" 2>/dev/null
    } | awk -F'|' 'NF > 10 && $2 !~ /workload|---/ {gsub(/ /, "", $3); gsub(/ /, "", $4);
        gsub(/ /, "", $5); gsub(/ /, "", $6); print $3 ":" $4, $5, $6}' >"$OUT/$v.$round"
  done
done
{
  echo "| layer | 3xFP16 default, ms per round | kernel | SS_HALF=0, ms per round | kernel |"
  echo "|---|---|---|---|---|"
  while read -r shape _; do
    row="| $shape |"
    for v in half tf32; do
      ms=$(for r in $(seq 1 "$ROUNDS"); do awk -v s="$shape" '$1 == s {print $3}' "$OUT/$v.$r"; done | paste -sd/)
      k=$(awk -v s="$shape" '$1 == s {print $2}' "$OUT/$v.$ROUNDS")
      row="$row $ms | $k |"
    done
    echo "$row"
  done <"$OUT/half.1"
} | tee "$OUT/half.md"
rm -f "$OUT"/*.[0-9]

stamp "enc_tasnet against cuDNN, default dispatch"
"$BENCH" --runs 30 --workload enc_tasnet --workload dec_tasnet --call-times >"$OUT/cudnn.md" 2>&1
grep -E "^\| (enc|dec)_tasnet" "$OUT/cudnn.md" | cut -d'|' -f2-11
stamp "doctest: $CASES"
timeout "$(budget 240)" "$TESTS" --test-case="$CASES" >"$OUT/tests.log" 2>&1 && stamp "tests ok" ||
  stamp "tests FAILED"
grep -E "tensor-core encoder|non-finite check|dynamic-range check|ERROR|FAILED|test cases" \
  "$OUT/tests.log" | tail -30

sanitize_case 'cuda:sanitize tensor-core encoder*'

stamp "done"
