#!/usr/bin/env bash
# A short device call for a tree whose full check (scripts/gpu-check.sh) does not fit the device
# time left: builds the tests and the benchmark, runs the named doctest CASES and the benchmark on
# WORKLOADS against cuDNN, within DEADLINE seconds.
#
#   OUT=$OUT CASES='cuda:sanitize pointwise*' WORKLOADS="tcn_pointwise" scripts/gpu-quick.sh
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
gpu_build build-quick
stamp "doctest: ${CASES:?}"
timeout "$(budget 120)" "$TESTS" --test-case="$CASES" >"$OUT/tests.log" 2>&1
echo "tests rc $?"
grep -E "MESSAGE|ERROR|test cases" "$OUT/tests.log" | grep -v "check ran" | cut -c1-220 | tail -20
args=(--runs 20)
for w in ${WORKLOADS:-tcn_pointwise}; do args+=(--workload "$w"); done
stamp "benchmark: ${WORKLOADS:-tcn_pointwise}"
timeout "$(budget 60)" "$BENCH" "${args[@]}" 2>/dev/null | grep -E '^\| [a-z]' | cut -d'|' -f2-11
stamp "done"
