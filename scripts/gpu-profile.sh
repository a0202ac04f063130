#!/usr/bin/env bash
# Profiles the main kernel of some benchmark workloads with Nsight Compute on the lent H200
# machine, one call: builds convbank-bench-cuda from the working tree, then for each workload
# runs `ncu --clock-control none` on one launch of its kernel (after the benchmark's accuracy
# run) and writes two files to $OUT: the sections' details (prof-W.txt) and the per-SASS
# instruction page with its warp-stall samples (src-W.csv). Prints each kernel's headline
# numbers last.
#
#   PROFILE="seedA:conv1d_wgmma_ss tcn_pointwise:conv1d_wgmma_ss" scripts/gpu-profile.sh
#
# Each entry is workload:kernel-name-regex. At most 8 files come back from the device machine:
# four workloads per call.
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-profile-out}
mkdir -p "$OUT"
PROFILE=${PROFILE:-"seedA:conv1d_wgmma_ss tcn_pointwise:conv1d_wgmma_ss enc_tasnet:encoder dec_tasnet:decoder_wgmma"}
export PATH=/usr/local/cuda/bin:$PATH
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

stamp "build"
cmake -S . -B build-prof -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=OFF >/tmp/prof-build.log 2>&1 &&
  ninja -C build-prof -j16 convbank-bench-cuda >>/tmp/prof-build.log 2>&1 ||
  { stamp "build FAILED"; tail -30 /tmp/prof-build.log; exit 1; }
bench=build-prof/apps/bench_cuda/convbank-bench-cuda
stamp "built"

sections=(SpeedOfLight MemoryWorkloadAnalysis ComputeWorkloadAnalysis SchedulerStats WarpStateStats
  InstructionStats Occupancy LaunchStats SourceCounters)
for entry in $PROFILE; do
  w=${entry%%:*}
  k=${entry#*:}
  stamp "ncu $w ($k)"
  args=()
  for s in "${sections[@]}"; do args+=(--section "$s"); done
  timeout 150 ncu --clock-control none "${args[@]}" -k "regex:$k" -s 1 -c 1 -f \
    -o "/tmp/prof-$w" "$bench" --no-cudnn --workload "$w" --runs 3 >/tmp/prof-$w.log 2>&1 ||
    { stamp "ncu $w failed"; tail -20 "/tmp/prof-$w.log"; continue; }
  ncu -i "/tmp/prof-$w.ncu-rep" --page details >"$OUT/prof-$w.txt" 2>&1
  ncu -i "/tmp/prof-$w.ncu-rep" --page source --csv --print-source sass >"$OUT/src-$w.csv" 2>&1 ||
    ncu -i "/tmp/prof-$w.ncu-rep" --page raw --csv >"$OUT/src-$w.csv" 2>&1
done

stamp "headlines"
for entry in $PROFILE; do
  w=${entry%%:*}
  echo "== $w"
  grep -E '^  [A-Za-z]|Duration|Throughput|Issued Ipc|Eligible|No Eligible|Registers|Achieved Occ' \
    "$OUT/prof-$w.txt" 2>/dev/null | grep -vE '^\s*-' | head -40
done
