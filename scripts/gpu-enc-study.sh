#!/usr/bin/env bash
# Where the local-order encoder's time goes on the lent H200, one call: builds the working tree
# (in build-gpu, so that a call right after scripts/gpu-check.sh rebuilds nothing), runs ROUNDS
# interleaved rounds of `convbank-bench-cuda --no-cudnn` on one-channel encoder shapes for each
# tile variant (VARIANTS: name:VAR=value,...), then Nsight Compute on one launch of enc_tasnet's
# kernel (warp states, scheduler, instruction mix, memory, and the per-SASS stall samples as
# CSV) for each of PROFILES. Writes ab.md, prof-enc-NAME.txt and src-enc-NAME.csv to $OUT and
# prints the headline numbers.
#
#   OUT=$OUT scripts/gpu-enc-study.sh
#   VARIANTS="c32:CONVBANK_CUDA_ENC_LOCAL_C=32 c64:CONVBANK_CUDA_ENC_LOCAL_C=64" PROFILE=0 \
#     scripts/gpu-enc-study.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
VARIANTS=${VARIANTS:-"default c64:CONVBANK_CUDA_ENC_LOCAL_C=64 a1:CONVBANK_CUDA_ENC_LOCAL_ALIGN=1"}
PROFILE=${PROFILE:-1}

gpu_build build-gpu

# The local-order encoder's test case first (TESTCASE= skips it): its tiles against float64.
TESTCASE=${TESTCASE-"cuda:sanitize local-order*"}
if [ -n "$TESTCASE" ]; then
  stamp "test $TESTCASE"
  timeout "$(budget 150)" "$TESTS" --test-case="$TESTCASE" 2>&1 | tail -4
fi

shapes=(
  "16,1,512,131080,16,8,0,1,1"
  "4,1,1024,131072,16,8,0,1,1"
  "8,1,512,160003,20,10,0,1,1"
  "8,1,512,131072,12,6,0,1,1"
  "8,1,256,131071,8,4,2,1,1"
  "8,1,256,131072,32,16,0,1,1"
)
args=(--no-cudnn --runs 30 --workload enc_tasnet --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
read -r -a variants <<<"$VARIANTS"
ab_rounds "local-order encoder tiles" conv1d_encoder_ "${args[@]}"

# Each of PROFILES (name:VAR=value,...) gets its own report.
PROFILES=${PROFILES:-"block"}
if ((PROFILE)); then
  sections=(SpeedOfLight MemoryWorkloadAnalysis ComputeWorkloadAnalysis SchedulerStats
    WarpStateStats InstructionStats Occupancy SourceCounters)
  nargs=()
  for s in "${sections[@]}"; do nargs+=(--section "$s"); done
  read -r -a profiles <<<"$PROFILES"
  for p in "${profiles[@]}"; do
    name=${p%%:*}
    envs=()
    [ "$p" != "$name" ] && IFS=, read -r -a envs <<<"${p#*:}"
    stamp "ncu enc_tasnet ($name)"
    if env "${envs[@]}" timeout "$(budget 120)" ncu --clock-control none "${nargs[@]}" \
      -k regex:encoder_local -s 1 -c 1 -f -o "/tmp/prof-$name" "$BENCH" --no-cudnn \
      --workload enc_tasnet --runs 3 >"/tmp/prof-$name.log" 2>&1; then
      ncu -i "/tmp/prof-$name.ncu-rep" --page details >"$OUT/prof-enc-$name.txt" 2>&1
      ncu -i "/tmp/prof-$name.ncu-rep" --page source --csv --print-source sass \
        >"$OUT/src-enc-$name.csv" 2>&1
      grep -E '^  [A-Za-z]|Duration|Throughput|Issued Ipc|Eligible|No Eligible|Registers|Achieved Occ|Stall' \
        "$OUT/prof-enc-$name.txt" | grep -vE '^\s*-' | head -40
    else
      stamp "ncu failed"
      tail -20 "/tmp/prof-$name.log"
    fi
  done
fi
stamp "done"
