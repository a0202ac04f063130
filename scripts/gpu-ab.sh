#!/usr/bin/env bash
# A/B timing on the lent H200 machine, one call: builds convbank-bench-cuda from the working
# tree and from a git revision (a worktree, default HEAD) side by side, optionally runs doctest
# cases of the working tree, then ROUNDS interleaved rounds of `convbank-bench-cuda --no-cudnn`
# over WORKLOADS for the revision and for each variant of the working tree (environment
# settings). Prints one table, workload x (revision, variants), ms, and writes it to $OUT.
#
#   REV=HEAD WORKLOADS="seedA tcn_pointwise" VARIANTS="new: raw2:CONVBANK_CUDA_SS_RAW_SLOTS=2" \
#     TEST_CASES='cuda: 3xFP16*' scripts/gpu-ab.sh
#
# A variant is name[:VAR=value[,VAR=value...]]; "new" alone runs the working tree as it is.
# On the lent machine the copy's git metadata can lag the working tree (in the twenty-third and
# twenty-fourth sessions it named an earlier commit as HEAD while carrying the later tree, and
# REV=HEAD built that earlier commit): name the base by its hash (REV=10a312e), so that a stale
# copy fails to find it instead of building another base, and check the hash that the table's
# first line prints.
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-ab-out}
mkdir -p "$OUT"
REV=${REV:-HEAD}
WORKLOADS=${WORKLOADS:-"seedA seedB tcn_pointwise"}
VARIANTS=${VARIANTS:-"new"}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-30}
TEST_CASES=${TEST_CASES:-}
export PATH=/usr/local/cuda/bin:$PATH
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }

configure() {
  cmake -S "$1" -B "$1/build-ab" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=OFF \
    >"$2" 2>&1
}

stamp "build: working tree and $REV ($(git rev-parse --short "$REV"))"
rm -rf /tmp/ab-base
git worktree add -f /tmp/ab-base "$REV" >/dev/null 2>&1 || { echo "no worktree for $REV"; exit 1; }
targets=(convbank-bench-cuda)
[ -n "$TEST_CASES" ] && targets+=(convbank_tests)
(configure . "$OUT/build-new.log" && ninja -C build-ab -j10 "${targets[@]}" >>"$OUT/build-new.log" 2>&1) &
new_pid=$!
(configure /tmp/ab-base "$OUT/build-base.log" &&
  ninja -C /tmp/ab-base/build-ab -j6 convbank-bench-cuda >>"$OUT/build-base.log" 2>&1) &
base_pid=$!
wait $new_pid || { stamp "working tree build FAILED"; tail -30 "$OUT/build-new.log"; exit 1; }
wait $base_pid || { stamp "$REV build FAILED"; tail -30 "$OUT/build-base.log"; exit 1; }
stamp "built"

if [ -n "$TEST_CASES" ]; then
  stamp "doctest cases '$TEST_CASES'"
  if timeout 240 build-ab/tests/convbank_tests --test-case="$TEST_CASES" >"$OUT/tests.log" 2>&1; then
    stamp "tests ok"
  else
    stamp "tests FAILED"
  fi
  grep -E "MESSAGE|ERROR|FAILED|CHECK|test cases" "$OUT/tests.log" | tail -30
fi

args=(--no-cudnn --runs "$RUNS")
for w in $WORKLOADS; do args+=(--workload "$w"); done
# bench NAME BINARY [VAR=value ...]: one run, "workload ms" lines into $OUT/NAME.ROUND.
bench() {
  local name=$1 bin=$2
  shift 2
  env "$@" "$bin" "${args[@]}" 2>/dev/null |
    awk -F'|' 'NF > 10 && $2 !~ /workload|---/ {gsub(/ /, "", $2); gsub(/ /, "", $6); print $2, $6}' \
      >"$OUT/$name.$round"
}
names=(base)
for round in $(seq 1 "$ROUNDS"); do
  stamp "round $round"
  bench base /tmp/ab-base/build-ab/apps/bench_cuda/convbank-bench-cuda
  for v in $VARIANTS; do
    name=${v%%:*}
    envs=()
    [[ $v == *:* ]] && IFS=, read -r -a envs <<<"${v#*:}"
    bench "$name" build-ab/apps/bench_cuda/convbank-bench-cuda "${envs[@]}"
    [ "$round" = 1 ] && names+=("$name")
  done
done

{
  echo "A/B $(date -u '+%Y-%m-%d %H:%M UTC'), base = $REV ($(git rev-parse --short "$REV")), ms per round"
  printf '| workload |'
  for n in "${names[@]}"; do printf ' %s |' "$n"; done
  echo
  printf '|---|'
  for _ in "${names[@]}"; do printf -- '---|'; done
  echo
  for w in $WORKLOADS; do
    printf '| %s |' "$w"
    for n in "${names[@]}"; do
      printf ' %s |' "$(for r in $(seq 1 "$ROUNDS"); do awk -v w="$w" '$1 == w {print $2}' "$OUT/$n.$r"; done | paste -sd/)"
    done
    echo
  done
} | tee "$OUT/ab.md"
rm -f "$OUT"/*.[0-9]
git worktree remove --force /tmp/ab-base >/dev/null 2>&1
stamp "done"
