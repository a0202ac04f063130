#!/usr/bin/env bash
# The tensor-core local-order encoder (conv_encoder_mma.cu) on the H200 in one device call:
# build; its sanitize case and the cases that name encoder kernels or run every kernel family;
# memcheck and racecheck on its sanitize case; one-channel encoders with it (the default), with
# the FFMA local-order encoder (CONVBANK_CUDA_ENC_MMA=0) and on other tiles, two rounds; three
# workloads against cuDNN with the host time per call; the CUDA API summary of one seedA run
# under nsys where it is installed.
#   scripts/gpu-enc-mma.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-$PWD/gpu-mma-out}
mkdir -p "$OUT"
BUILD=build-gpu
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=OFF >/tmp/build.log 2>&1 &&
  ninja -C "$BUILD" -j16 convbank_tests convbank-bench-cuda >>/tmp/build.log 2>&1 ||
  { tail -30 /tmp/build.log; exit 1; }
grep -A2 "encoder_local_mma" /tmp/build.log | head -5
stamp "built"
T=$BUILD/tests/convbank_tests
B=$BUILD/apps/bench_cuda/convbank-bench-cuda
cases='*tensor-core local-order*,*local-order encoder on every*,*memory-bound kernels*,*NaN/Inf*'
cases+=',*1e-6 to 1e3*,*all-positive*,*3xFP16*,*64-bit*,*conv1d random grid*'
timeout 240 "$T" --test-case="$cases" -s 2>&1 | grep -E "MESSAGE|ERROR|FAILED|test cases|CHECK\(" |
  grep -vE "^\s*$" | tail -40 | tee "$OUT/tests.md"
stamp "tests"
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool "$tool" "$T" \
    --test-case='cuda:sanitize tensor-core local-order*' 2>&1 | tail -4
  stamp "$tool"
done
shapes="--shape 16,1,512,131072,16,8,0,1,1 --shape 4,1,1024,131072,16,8,0,1,1
  --shape 8,1,512,131072,12,6,0,1,1 --shape 8,1,128,131072,3,1,0,1,1
  --shape 16,1,64,131071,16,8,3,1,1 --shape 4,1,64,65536,5,1,2,1,1
  --shape 16,1,512,131072,16,4,0,1,1 --shape 16,1,256,131072,8,4,0,1,1"
{
  for round in 1 2; do
    for v in CONVBANK_AB=default CONVBANK_CUDA_ENC_MMA=0 CONVBANK_CUDA_ENC_MMA_MT=2 \
      CONVBANK_CUDA_ENC_MMA_C=32 CONVBANK_CUDA_ENC_MMA_C=128 CONVBANK_CUDA_ENC_ALIGNED=0; do
      [ "$round" = 2 ] && [[ "$v" == *_C=* || "$v" == *ALIGNED* ]] && continue
      echo "## $v round $round"
      # shellcheck disable=SC2086
      env $v timeout 40 "$B" --no-cudnn --runs 30 --op conv1d $shapes 2>/dev/null |
        grep -E '^\| custom' | awk -F'|' '{print $4, $5, $6, $13}'
    done
  done
  echo "## workloads against cuDNN"
  timeout 90 "$B" --runs 30 --workload enc_tasnet --workload dec_tasnet --workload tcn_pointwise \
    2>/dev/null | grep -E '^\|' | cut -c1-220
} | tee "$OUT/bench.md"
stamp "bench"
if command -v nsys >/dev/null; then
  timeout 60 nsys profile -t cuda -o /tmp/seedA --force-overwrite true "$B" --no-cudnn \
    --workload seedA --workload tcn_pointwise --runs 10 >/dev/null 2>&1
  timeout 40 nsys stats -r cuda_api_sum /tmp/seedA.nsys-rep 2>&1 | head -40 | tee "$OUT/nsys.md"
else
  echo "no nsys"
fi
stamp "done"
