#!/usr/bin/env bash
# The pointwise tensor-core kernel (conv_pointwise_wgmma.cu) on the lent H200, one call: builds
# the working tree, runs its sanitize case and the NaN/Inf, dynamic-range and all-positive
# families, memcheck and racecheck on its case, then ROUNDS interleaved rounds of
# `convbank-bench-cuda --no-cudnn` on pointwise shapes with the kernel (CONVBANK_CUDA_PW=1)
# and without it (=0: the shared-memory-operand kernel), and tcn_pointwise against cuDNN,
# within DEADLINE seconds. Prints a table, shape x variant, ms per round; logs go to $OUT.
#
#   OUT=$OUT ROUNDS=2 scripts/gpu-pw.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-pw-out}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}
export PATH=/usr/local/cuda/bin:$PATH
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
DEADLINE=${DEADLINE:-560}
budget() {
  local left=$((DEADLINE - ($(date +%s) - start)))
  ((left < 5)) && left=5
  echo $(($1 < left ? $1 : left))
}
CASE='cuda:sanitize pointwise tensor-core*'
CASES=${CASES:-"$CASE,cuda:sanitize NaN/Inf*,cuda: inputs and weights*,cuda: all-positive*"}

stamp "build"
cmake -S . -B build-pw -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=OFF >"$OUT/build.log" 2>&1 &&
  ninja -C build-pw -j16 convbank-bench-cuda convbank_tests >>"$OUT/build.log" 2>&1 ||
  { stamp "build FAILED"; tail -40 "$OUT/build.log"; exit 1; }
TESTS=build-pw/tests/convbank_tests
BENCH=build-pw/apps/bench_cuda/convbank-bench-cuda

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
  "4,512,512,16384,1,1,0,1,1"
  "16,64,256,16384,1,1,0,1,1"
  "8,128,64,65536,1,1,0,1,1"
  "16,512,100,16384,1,1,0,1,1"
  "2,384,384,8192,1,1,0,1,1"
)
args=(--no-cudnn --runs 30 --op conv1d)
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
VARIANTS=${VARIANTS:-"ss:CONVBANK_CUDA_PW=0 pw:CONVBANK_CUDA_PW=1"}
read -r -a variants <<<"$VARIANTS"
for round in $(seq 1 "$ROUNDS"); do
  stamp "round $round"
  for v in "${variants[@]}"; do
    name=${v%%:*}
    IFS=, read -r -a envs <<<"${v#*:}"
    env "${envs[@]}" "$BENCH" "${args[@]}" 2>"$OUT/$name.err.$round" |
      awk -F'|' 'NF > 10 && $2 !~ /workload|---/ {gsub(/ /, "", $4); gsub(/ /, "", $5);
        gsub(/ /, "", $6); print $4, $5, $6}' >"$OUT/$name.$round"
  done
done
{
  echo "pointwise $(date -u '+%Y-%m-%d %H:%M UTC'), ms per round (kernel of the last round)"
  printf '| shape |'
  for v in "${variants[@]}"; do printf ' %s |' "${v%%:*}"; done
  echo
  printf '|---|'
  for _ in "${variants[@]}"; do printf -- '---|'; done
  echo
  while read -r shape _; do
    printf '| %s |' "$shape"
    for v in "${variants[@]}"; do
      n=${v%%:*}
      ms=$(for r in $(seq 1 "$ROUNDS"); do awk -v s="$shape" '$1 == s {print $3}' "$OUT/$n.$r"; done | paste -sd/)
      k=$(awk -v s="$shape" '$1 == s {print $2}' "$OUT/$n.$ROUNDS")
      printf ' %s %s |' "$ms" "$k"
    done
    echo
  done <"$OUT/${variants[0]%%:*}.1"
} | tee "$OUT/ab.md"
rm -f "$OUT"/*.[0-9]

stamp "tcn_pointwise and x_pw_odd against cuDNN, default dispatch"
"$BENCH" --runs 30 --workload tcn_pointwise --workload x_pw_odd >"$OUT/cudnn.md" 2>&1
grep -E "^\| (tcn_pointwise|x_pw_odd)" "$OUT/cudnn.md" | cut -d'|' -f2-14

stamp "doctest: $CASES"
timeout "$(budget 200)" "$TESTS" --test-case="$CASES" >"$OUT/tests.log" 2>&1 && stamp "tests ok" ||
  stamp "tests FAILED"
grep -E "pointwise|non-finite check|dynamic-range check|ERROR|FAILED|test cases" \
  "$OUT/tests.log" | tail -30

for tool in memcheck racecheck; do
  stamp "$tool on the pointwise case"
  timeout "$(budget 120)" compute-sanitizer --tool "$tool" --error-exitcode 9 "$TESTS" \
    --test-case="$CASE" >"$OUT/$tool.log" 2>&1 && echo "$tool ok" || echo "$tool FAILED"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Hazard" "$OUT/$tool.log" | sort | uniq -c | head -5
done
stamp "done"
