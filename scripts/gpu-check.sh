#!/usr/bin/env bash
# The GPU check, one call on the lent H200 machine (see shared/device-notes.md):
# configure (Release, sm_90, no libsndfile there) -> build -> all tests (ctest: cuda:*, then the
# CPU ones) -> compute-sanitizer memcheck + racecheck on the cuda:sanitize* subset (before the
# benchmark, whose A/B tables the deadline may cut) -> convbank-bench-cuda against cuDNN (and the
# A/B tables) -> streaming latency on the GPU (convbank bench-stream --device cuda against
# PyTorch with CUDA-graph replay, scripts/bench_stream.py; the cuda:stream* tests run in the test
# stage) -> PyTorch parity of `convbank conv1d|conv-transpose1d --device cuda`.
# Logs and JSON go to $OUT (at most 8 files come back from the device machine); a short
# summary is printed last. Kept under ~9 minutes.
#
#   scripts/gpu-check.sh                       # everything
#   STAGES="build bench" scripts/gpu-check.sh  # a subset: build test sanitize parity bench stream probe
#   STREAM_ARGS="--count 2000" STAGES="build stream" scripts/gpu-check.sh
#   BENCH_ARGS="--workload seedB" scripts/gpu-check.sh
#   AB=0 scripts/gpu-check.sh                  # everything but the A/B tables
#   AB=decoders scripts/gpu-check.sh           # the decoders' A/B table only
# Profiles of single kernels: scripts/gpu-profile.sh.
#   TEST_CASES='cuda:sanitize*' STAGES="build test bench" BENCH_ARGS="--workload dec_tasnet" \
#     scripts/gpu-check.sh   # quick iteration: only these doctest cases, no CPU tests
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
STAGES=${STAGES:-"build test sanitize parity bench stream"}
STREAM_ARGS=${STREAM_ARGS:-}
BENCH_ARGS=${BENCH_ARGS:-}
AB=${AB:-1}  # 0: the main benchmark table only, none of the A/B tables after it; decoders: theirs
# only (also after a BENCH_ARGS table)
export PATH=/usr/local/cuda/bin:$PATH
declare -A status
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
DEADLINE=${DEADLINE:-540}  # seconds for the whole script (the device call allows 600)
# budget N: N seconds, or what is left before the deadline (minus a margin for the summary).
budget() {
  local left=$(( DEADLINE - ($(date +%s) - start) - 15 ))
  (( left < 5 )) && left=5
  (( $1 < left )) && echo "$1" || echo "$left"
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?') + uncommitted changes: $(git status --porcelain 2>/dev/null | wc -l) paths"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null
  nvcc --version | tail -1
} | tee "$OUT/summary.txt"

if has build; then
  stamp "configure + build"
  if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=OFF >"$OUT/build.log" 2>&1 &&
     ninja -C "$BUILD" -j16 -k 0 >>"$OUT/build.log" 2>&1; then
    status[build]=ok
  else
    status[build]=FAIL
    tail -40 "$OUT/build.log"
  fi
  stamp "build: ${status[build]}"
fi

TESTS=$BUILD/tests/convbank_tests
TEST_CASES=${TEST_CASES:-}
if has test && [ -x "$TESTS" ] && [ -n "$TEST_CASES" ]; then
  stamp "doctest cases '$TEST_CASES' only"
  status[test]=ok
  timeout "$(budget 220)" "$TESTS" --test-case="$TEST_CASES" --success=false -s >"$OUT/ctest.log" 2>&1 ||
    status[test]=FAIL
  grep -E "MESSAGE|non-finite|kernel|ERROR|FAILED|test cases" "$OUT/ctest.log" | tail -40
  stamp "selected tests: ${status[test]}"
elif has test && [ -x "$TESTS" ]; then
  stamp "cuda:* tests (ctest -R '^cuda:' -V: their messages carry worst errors, kernels, slices)"
  status[test]=ok
  timeout "$(budget 220)" ctest --test-dir "$BUILD" -R '^cuda:' -V --timeout 215 >"$OUT/ctest.log" 2>&1 ||
    status[test]=FAIL
  stamp "cuda tests: ${status[test]} ($(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1))"
  # The CPU tests before the long stages, so that the deadline never cuts them (CI runs them too).
  stamp "ctest: the other (CPU) tests"
  timeout "$(budget 120)" ctest --test-dir "$BUILD" -E '^cuda:' -j 12 --output-on-failure --timeout 110 \
    >>"$OUT/ctest.log" 2>&1 || status[test]=FAIL
  stamp "all tests: ${status[test]} ($(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1))"
fi

if has sanitize && [ -x "$TESTS" ]; then
  stamp "compute-sanitizer memcheck + racecheck on cuda:sanitize*"
  status[sanitize]=ok
  # racecheck leaves out the 3xFP16 case: it reports the job scale that the SS kernel's producer
  # stores before bar.arrive and its consumers load after bar.sync on the same named barrier (and
  # the reverse for the stage's reuse) as a hazard, though the PTX ISA (barrier, 9.7.13.1)
  # documents exactly that producer/consumer exchange as ordered; memcheck runs it.
  for tool in memcheck racecheck; do
    echo "=== $tool ===" >>"$OUT/sanitize.log"
    exclude=""
    [ "$tool" = racecheck ] && exclude='cuda:sanitize 3xFP16*'
    timeout "$(budget 75)" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$TESTS" --test-case='cuda:sanitize*' --test-case-exclude="$exclude" \
      >>"$OUT/sanitize.log" 2>&1 || status[sanitize]=FAIL
  done
  stamp "sanitize: ${status[sanitize]}"
fi

if has bench && [ -x "$BUILD/apps/bench_cuda/convbank-bench-cuda" ]; then
  stamp "benchmark against cuDNN"
  # shellcheck disable=SC2086
  if timeout "$(budget 200)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" ${BENCH_ARGS:---workload all --workload offlist} --call-times --json "$OUT/bench.json" \
       >"$OUT/bench.md" 2>"$OUT/bench.err"; then
    status[bench]=ok
  else
    status[bench]=FAIL
    tail -5 "$OUT/bench.err"
  fi
  cat "$OUT/bench.err" >>"$OUT/bench.md"; rm -f "$OUT/bench.err"
  if { [ -z "$BENCH_ARGS" ] && [ "$AB" = 1 ]; } || [ "$AB" = decoders ]; then
    # Tensor-core decoders: the default against their weight planes staged one load at a time
    # (log step 130) and against them staged by 4-byte loads instead of 16-byte ones (131),
    # interleaved, two rounds; with each call's host time and time queued back to back.
    dec_shapes="--shape 16,512,1,16383,16,8,0,1,1 --shape 16,512,1,20000,16,8,0,1,1
      --shape 16,512,2,16383,8,4,0,1,1 --shape 8,256,1,40000,16,8,0,1,1
      --shape 16,512,1,16383,16,4,0,1,1 --shape 4,128,1,40000,16,8,0,1,1"
    for round in 1 2; do
      for v in CONVBANK_AB=default CONVBANK_CUDA_DECODER_BATCHED_PLANES=0 \
        CONVBANK_CUDA_DECODER_VECTOR_PLANES=0; do
        echo "## decoders, $v, round $round" >>"$OUT/bench.md"
        # shellcheck disable=SC2086
        env $v timeout "$(budget 30)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" --no-cudnn \
          --runs 30 --call-times --op conv-transpose1d $dec_shapes 2>/dev/null | grep -E '^\| custom' \
          >>"$OUT/bench.md"
        echo "## decoders (Conv1d 512 -> 1, K 1; 8 x 128 -> 1, K 7), $v, round $round" >>"$OUT/bench.md"
        env $v timeout "$(budget 20)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" --no-cudnn \
          --runs 30 --call-times --op conv1d --shape 16,512,1,16384,1,1,0,1,1 --shape 8,128,1,131072,7,1,3,1,1 \
          2>/dev/null | grep -E '^\| custom' >>"$OUT/bench.md"
      done
    done
  fi
  if [ -z "$BENCH_ARGS" ] && [ "$AB" = 1 ]; then
    # A/B of the dispatcher's choices: the tensor-core kernel wherever it applies, and the FFMA
    # kernels only (JSON for docs/performance.md), on the nine workloads and the off-list shapes.
    for policy in 1 0; do
      echo "## CONVBANK_CUDA_WGMMA=$policy" >>"$OUT/bench.md"
      CONVBANK_CUDA_WGMMA=$policy timeout "$(budget 90)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
        --no-cudnn --workload all --workload offlist --json "$OUT/bench-wgmma$policy.json" \
        2>/dev/null | grep -E '^\| (seed|enc|dec|tcn|up|x_)' >>"$OUT/bench.md"
    done
    # The stride-1 convolutions on the register-fragment kernel instead of the
    # shared-memory-operand one (table only: at most 8 files come back from the device).
    echo "## CONVBANK_CUDA_WGMMA_SS=0" >>"$OUT/bench.md"
    CONVBANK_CUDA_WGMMA_SS=0 timeout "$(budget 90)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
      --no-cudnn --workload all --workload offlist 2>/dev/null |
      grep -E '^\| (seed|enc|dec|tcn|up|x_)' >>"$OUT/bench.md"
    # The SS kernel with 3xTF32 products everywhere instead of 3xFP16 where the dispatcher picks it.
    echo "## CONVBANK_CUDA_SS_HALF=0" >>"$OUT/bench.md"
    CONVBANK_CUDA_SS_HALF=0 timeout "$(budget 60)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
      --no-cudnn --workload seedA --workload seedB --workload enc_stft512 --workload x_dilated \
      --workload x_k3_odd --workload x_dilated_t 2>/dev/null | grep -E '^\| (seed|enc|x_)' >>"$OUT/bench.md"
    # Rows off 32-byte boundaries with the SS kernel's plain epilogue instead of whole sectors.
    echo "## CONVBANK_CUDA_SS_SECTORS=0" >>"$OUT/bench.md"
    CONVBANK_CUDA_SS_SECTORS=0 timeout "$(budget 60)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
      --no-cudnn --workload seedA --workload seedB 2>/dev/null | grep -E '^\| seed' >>"$OUT/bench.md"
    # The SS kernel's input as the producer's 16-byte pieces instead of bulk tensor copies.
    echo "## CONVBANK_CUDA_SS_TMA=0" >>"$OUT/bench.md"
    CONVBANK_CUDA_SS_TMA=0 timeout "$(budget 60)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
      --no-cudnn --workload seedA --workload seedB --workload tcn_pointwise --workload x_up4x \
      --workload x_pw_odd --workload x_k3_odd 2>/dev/null | grep -E '^\| (seed|tcn|x_)' \
      >>"$OUT/bench.md"
    # Strided ConvTranspose1d without depth-to-space (phase convolutions, phase GEMM, decoders).
    echo "## CONVBANK_CUDA_D2S=0" >>"$OUT/bench.md"
    CONVBANK_CUDA_D2S=0 timeout "$(budget 60)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
      --no-cudnn --workload up2x --workload dec_stft512 --workload x_up4x --workload x_grouped_t \
      --workload x_dec4 2>/dev/null | grep -E '^\| (dec|up|x_)' >>"$OUT/bench.md"
    # Strided Conv1d without space-to-depth (register-fragment kernel, FFMA GEMM).
    echo "## CONVBANK_CUDA_S2D=0" >>"$OUT/bench.md"
    CONVBANK_CUDA_S2D=0 timeout "$(budget 60)" "$BUILD/apps/bench_cuda/convbank-bench-cuda" \
      --no-cudnn --workload enc_stft512 --workload x_strided 2>/dev/null | grep -E '^\| (enc|x_)' \
      >>"$OUT/bench.md"
    # One-channel encoders: the dispatcher's default, the local-order encoder's window staged
    # with the per-word phase wrap and loaded with a test per tap ("none", log step 129),
    # conv1d_encoder_ffma instead of the local-order encoder, the tensor-core encoder everywhere;
    # default and "none" again. The second shape is enc_tasnet on rows of 16384 frames, each
    # starting on a 128-byte line (log step 122).
    enc_shapes="--shape 16,1,512,131072,16,8,0,1,1 --shape 16,1,512,131080,16,8,0,1,1
      --shape 8,1,512,160003,20,10,0,1,1
      --shape 4,1,1024,131072,16,8,0,1,1 --shape 8,1,128,131072,3,1,0,1,1
      --shape 16,1,256,131072,32,16,0,1,1 --shape 16,1,64,131071,16,8,3,1,1
      --shape 8,1,512,131072,12,6,0,1,1 --shape 4,1,64,65536,5,1,2,1,1
      --shape 16,1,512,131072,16,4,0,1,1 --shape 8,1,256,131072,8,4,0,1,1"
    none=CONVBANK_CUDA_ENC_FIXED_PHASE=0,CONVBANK_CUDA_ENC_LOCAL_FASTLOAD=0
    for v in CONVBANK_AB=default $none CONVBANK_CUDA_ENC_LOCAL=0 CONVBANK_CUDA_ENC_WGMMA=1 \
      CONVBANK_AB=default $none; do
      echo "## encoders, $v" >>"$OUT/bench.md"
      # shellcheck disable=SC2086
      env ${v//,/ } timeout "$(budget 40)" \
        "$BUILD/apps/bench_cuda/convbank-bench-cuda" --no-cudnn --op conv1d $enc_shapes 2>/dev/null |
        grep -E '^\| custom' >>"$OUT/bench.md"
    done
    # Pointwise layers on the pointwise tensor-core kernel (two column tiles per block tile where
    # they pair up, or one: CONVBANK_CUDA_PW_WIDE=0) and on the shared-memory-operand kernel
    # (CONVBANK_CUDA_PW=0), two rounds.
    pw_shapes="--shape 16,512,128,16384,1,1,0,1,1 --shape 16,512,128,16383,1,1,0,1,1
      --shape 4,512,512,16384,1,1,0,1,1 --shape 2,384,384,8192,1,1,0,1,1
      --shape 16,512,100,16384,1,1,0,1,1 --shape 8,128,64,65536,1,1,0,1,1
      --shape 8,256,256,16384,1,1,0,1,1 --shape 16,64,256,16384,1,1,0,1,1
      --shape 16,256,64,16384,1,1,0,1,1 --shape 8,512,256,8192,1,1,0,1,1"
    for round in 1 2; do
      for v in CONVBANK_CUDA_PW=1 CONVBANK_CUDA_PW=1,CONVBANK_CUDA_PW_WIDE=0 CONVBANK_CUDA_PW=0 \
        CONVBANK_AB=default; do
        echo "## pointwise, $v, round $round" >>"$OUT/bench.md"
        # shellcheck disable=SC2086
        env ${v//,/ } timeout "$(budget 30)" \
          "$BUILD/apps/bench_cuda/convbank-bench-cuda" --no-cudnn --runs 30 --op conv1d $pw_shapes \
          2>/dev/null | grep -E '^\| custom' >>"$OUT/bench.md"
      done
    done
  fi
  stamp "bench: ${status[bench]}"
fi

if has stream && [ -x "$BUILD/apps/convbank" ]; then
  stamp "streaming latency on cuda: convbank bench-stream vs PyTorch CUDA graphs"
  # shellcheck disable=SC2086
  if PYTHONUNBUFFERED=1 timeout "$(budget 150)" python3 scripts/bench_stream.py "$BUILD" --device cuda \
       $STREAM_ARGS >"$OUT/stream.md" 2>"$OUT/stream.err"; then
    status[stream]=ok
  else
    status[stream]=FAIL
    tail -5 "$OUT/stream.err"
  fi
  cat "$OUT/stream.err" >>"$OUT/stream.md"; rm -f "$OUT/stream.err"
  stamp "stream: ${status[stream]}"
fi

# probe: the machine's floor for one host-in/host-out graph call, and the chain's latency at 256
# frames with the stream copies as copy-engine nodes (A/B against the kernel copies above).
if has probe && [ -x "$BUILD/apps/convbank" ]; then
  stamp "latency floors and copy-path A/B"
  {
    timeout "$(budget 60)" python3 tests/tools/cuda_latency_probe.py
    echo "kernel copies (default):"
    timeout "$(budget 30)" "$BUILD/apps/convbank" bench-stream --device cuda --chunks 256 --batches 1 8 --count 10000
    echo "copy-engine copies (CONVBANK_CUDA_STREAM_COPIES=memcpy):"
    CONVBANK_CUDA_STREAM_COPIES=memcpy timeout "$(budget 30)" "$BUILD/apps/convbank" bench-stream \
      --device cuda --chunks 256 --batches 1 8 --count 10000
  } >"$OUT/probe.md" 2>&1
  tail -30 "$OUT/probe.md"
fi

if has parity && [ -x "$BUILD/apps/convbank" ]; then
  stamp "PyTorch parity of the layer tools on cuda"
  if PYTHONUNBUFFERED=1 timeout "$(budget 120)" python3 tests/tools/gpu_parity.py --app "$BUILD/apps/convbank" \
       --count 20 --json "$OUT/parity.json" >"$OUT/parity.log" 2>&1; then
    status[parity]=ok
  else
    status[parity]=FAIL
  fi
  stamp "parity: ${status[parity]} ($(tail -1 "$OUT/parity.log"))"
fi

{
  echo
  echo "## gpu-check summary ($(( $(date +%s) - start )) s)"
  for s in build test sanitize parity bench stream; do
    [ -n "${status[$s]:-}" ] && echo "- $s: ${status[$s]}"
  done
  [ -f "$OUT/ctest.log" ] && grep -E "tests passed|tests failed|grid:|slices|edges:|non-finite|Failed|\*\*\*Failed|test cases:" "$OUT/ctest.log" | head -50
  [ -f "$OUT/sanitize.log" ] && grep -E "ERROR SUMMARY|=== " "$OUT/sanitize.log"
  [ -f "$OUT/parity.log" ] && tail -1 "$OUT/parity.log"
  [ -f "$OUT/bench.md" ] && grep -E "^\||^#" "$OUT/bench.md"
  [ -f "$OUT/stream.md" ] && { echo; echo "## streaming latency (cuda)"; grep -E "^\||^TasNet" "$OUT/stream.md"; }
} | tee -a "$OUT/summary.txt"
for s in "${status[@]}"; do [ "$s" = ok ] || exit 1; done
exit 0
