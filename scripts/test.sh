#!/usr/bin/env bash
# Builds Proctor, runs the whole GoogleTest suite through ctest, the black-box acceptance
# checks in ../shared/acceptance when that directory exists next to the project, the
# fuzzers for a bounded time, and a quick benchmark run (that it runs, not its figures).
# Fails if any test or check fails (both always run, so one report shows everything).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build.sh

rc=0
echo "== ctest"
ctest --test-dir build --output-on-failure -j2 --timeout 600 || rc=1

acceptance=../shared/acceptance
if [[ -d $acceptance ]]; then
  echo "== acceptance checks ($acceptance)"
  # The checks run against ./build/bin and must be started from the project's root.
  bash "$acceptance/run-all" || rc=1
else
  echo "== acceptance checks: $acceptance not found, skipped"
fi

echo "== fuzzers (journal-record and wire-message decoding, ${FUZZ_SECONDS:-20} s each)"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}" || rc=1

echo "== benchmark smoke run (proctor-bench --quick; figures are not checked)"
bench_dir=$(mktemp -d)
build/bin/proctor-bench --quick --data-dir "$bench_dir/run" >/dev/null || rc=1
rm -rf "$bench_dir"

if ((rc != 0)); then
  echo "test: FAILED" >&2
else
  echo "test: all passed"
fi
exit "$rc"
