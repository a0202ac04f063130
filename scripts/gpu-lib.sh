# shellcheck shell=bash disable=SC2154  # `variants` is the caller's
# Shared by the one-call device scripts (scripts/gpu-pw.sh, scripts/gpu-enc-wgmma.sh,
# scripts/gpu-quick.sh); sourced from the repository root. Provides the output folder (OUT,
# default SCRIPT-out), the stage clock, the build, interleaved A/B rounds (ROUNDS, default 2) of
# convbank-bench-cuda with their table, and the sanitizers on one case.
OUT=${OUT:-$PWD/$(basename "$0" .sh)-out}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}
export PATH=/usr/local/cuda/bin:$PATH
start=$(date +%s)
stamp() { echo "[$(($(date +%s) - start))s] $*"; }
# Seconds a stage may take: at most $1, and what is left before DEADLINE (seconds from start).
DEADLINE=${DEADLINE:-560}
budget() {
  local left=$((DEADLINE - ($(date +%s) - start)))
  ((left < 5)) && left=5
  echo $(($1 < left ? $1 : left))
}

# gpu_build DIR: configures and builds the benchmark and the tests in DIR (log: $OUT/build.log),
# prints ptxas's serialization (C75xx) and spill lines, sets TESTS and BENCH; exits on failure.
gpu_build() {
  stamp "build"
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCONVBANK_ENABLE_CUDA=ON -DCONVBANK_ENABLE_SNDFILE=OFF >"$OUT/build.log" 2>&1 &&
    ninja -C "$1" -j16 convbank-bench-cuda convbank_tests >>"$OUT/build.log" 2>&1 ||
    { stamp "build FAILED"; tail -40 "$OUT/build.log"; exit 1; }
  grep -E "C75[0-9]{2}|spill" "$OUT/build.log" | sort | uniq -c | head
  TESTS=$1/tests/convbank_tests
  BENCH=$1/apps/bench_cuda/convbank-bench-cuda
}

# ab_rounds TITLE STRIP ARGS...: ROUNDS interleaved rounds of `$BENCH ARGS...` for each entry
# of the array `variants` (name[:VAR=value[,VAR=value...]]), then a table shape x variant, ms
# per round and the last round's kernel (STRIP removed from its name), to $OUT/ab.md.
ab_rounds() {
  local title=$1 strip=$2 v name round r shape ms k
  shift 2
  for round in $(seq 1 "$ROUNDS"); do
    stamp "round $round"
    for v in "${variants[@]}"; do
      name=${v%%:*}
      local envs=()
      [ "$v" != "$name" ] && IFS=, read -r -a envs <<<"${v#*:}"
      # "shape kernel ms" lines (columns 4, 5, 6 of the table: shape, kernel, ours ms).
      env "${envs[@]}" "$BENCH" "$@" 2>/dev/null |
        awk -F'|' 'NF > 10 && $2 !~ /workload|---/ {gsub(/ /, "", $4); gsub(/ /, "", $5);
          gsub(/ /, "", $6); print $4, $5, $6}' >"$OUT/$name.$round"
    done
  done
  {
    echo "$title $(date -u '+%Y-%m-%d %H:%M UTC'), ms per round (kernel of the last round)"
    printf '| shape |'
    for v in "${variants[@]}"; do printf ' %s |' "${v%%:*}"; done
    echo
    printf '|---|'
    for _ in "${variants[@]}"; do printf -- '---|'; done
    echo
    while read -r shape _; do
      printf '| %s |' "$shape"
      for v in "${variants[@]}"; do
        name=${v%%:*}
        ms=$(for r in $(seq 1 "$ROUNDS"); do awk -v s="$shape" '$1 == s {print $3}' "$OUT/$name.$r"; done | paste -sd/)
        k=$(awk -v s="$shape" '$1 == s {print $2}' "$OUT/$name.$ROUNDS")
        printf ' %s %s |' "$ms" "${k#"$strip"}"
      done
      echo
    done <"$OUT/${variants[0]%%:*}.1"
  } | tee "$OUT/ab.md"
  rm -f "$OUT"/*.[0-9]
}

# sanitize_case CASE: memcheck and racecheck on one doctest case of $TESTS.
sanitize_case() {
  local tool
  for tool in memcheck racecheck; do
    stamp "$tool on '$1'"
    timeout "$(budget 120)" compute-sanitizer --tool "$tool" --error-exitcode 9 "$TESTS" \
      --test-case="$1" >"$OUT/$tool.log" 2>&1 && echo "$tool ok" || echo "$tool FAILED"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Hazard" "$OUT/$tool.log" | sort | uniq -c |
      head -5
  done
}
