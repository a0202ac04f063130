#!/usr/bin/env bash
# The one-channel encoder's aligned channel tiles (CONVBANK_CUDA_ENC_LOCAL_ALIGN) and the
# tensor-core decoder's L2 prefetch (CONVBANK_CUDA_DECODER_PREFETCH) on the lent H200, one call:
# builds the working tree, runs the local-order encoder's sanitize case with each alignment and
# the copy-engine decoder's with a prefetch, then ROUNDS interleaved rounds of
# `convbank-bench-cuda --no-cudnn` on one-channel encoder shapes for each alignment and on
# decoder shapes for each prefetch depth, within DEADLINE seconds. Prints two tables, shape x
# variant, ms per round, and writes the logs to $OUT.
#
#   OUT=$OUT ROUNDS=2 scripts/gpu-enc-align.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
ALIGNS=${ALIGNS:-"0 8 32"}
PREFETCHES=${PREFETCHES:-"0 4"}
NARROW=${NARROW:-0}
TEST_ALIGNS=${TEST_ALIGNS:-"8"}

gpu_build build-enc

for al in $TEST_ALIGNS; do
  stamp "sanitize case, align $al"
  CONVBANK_CUDA_ENC_LOCAL_ALIGN=$al timeout "$(budget 60)" "$TESTS" \
    --test-case='cuda:sanitize local-order*' >"$OUT/test-$al.log" 2>&1 && echo ok || echo FAILED
  grep -E "local-order encoder:|ERROR|test cases" "$OUT/test-$al.log" | cut -c1-200 | head -8
done

stamp "decoder sanitize case, prefetch 4"
CONVBANK_CUDA_DECODER_PREFETCH=4 timeout "$(budget 60)" "$TESTS" \
  --test-case='cuda:sanitize tensor-core decoder*' >"$OUT/test-dec.log" 2>&1 && echo ok || echo FAILED
grep -E "ERROR|test cases" "$OUT/test-dec.log" | cut -c1-200 | head -8

shapes=(
  "16,1,512,131080,16,8,0,1,1"
  "4,1,1024,131072,16,8,0,1,1"
  "8,1,512,160003,20,10,0,1,1"
  "16,1,512,131064,16,8,0,1,1"
  "16,1,512,131056,16,8,0,1,1"
)
args=(--no-cudnn --runs 30 --workload enc_tasnet --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
variants=()
for al in $ALIGNS; do variants+=("a$al:CONVBANK_CUDA_ENC_LOCAL_ALIGN=$al"); done
ab_rounds "encoders, aligned channel tiles" conv1d_encoder_ "${args[@]}"

args=(--no-cudnn --runs 30 --workload dec_tasnet --workload x_dec_pow2 --op conv-transpose1d
  --shape 16,512,1,20000,16,8,0,1,1 --shape 16,512,2,16383,8,4,0,1,1 --shape 8,256,1,40000,16,8,0,1,1)
variants=()
for pf in $PREFETCHES; do variants+=("p$pf:CONVBANK_CUDA_DECODER_PREFETCH=$pf"); done
# 128-row tiles (more stages fit in the ring) without and with a prefetch.
[ "$NARROW" = 1 ] && variants+=("narrow-p0:CONVBANK_CUDA_DECODER_WIDE=0" "narrow-p4:CONVBANK_CUDA_DECODER_WIDE=0,CONVBANK_CUDA_DECODER_PREFETCH=4")
ab_rounds "decoders, L2 prefetch" conv_transpose1d_decoder_ "${args[@]}"
stamp "done"
