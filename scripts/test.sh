#!/usr/bin/env bash
# Builds Proctor, checks its format and lints it (scripts/lint.sh), runs the whole GoogleTest
# suite through ctest, builds examples/release against Proctor installed to a temporary
# prefix and runs its test, the black-box acceptance
# checks in ../shared/acceptance when that directory exists next to the project, the Debian
# packages (built and checked by scripts/package.sh), the unit suites and the engine suite
# under ASan+UBSan (scripts/sanitize.sh asan), the fuzzers for a bounded time, and a quick
# benchmark run (that it runs, not its figures).
# Fails if any test or check fails (both always run, so one report shows everything).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/build.sh

rc=0
failed=()  # the phases that failed, named again at the end (a CI log is often read from its tail)
echo "== lint (scripts/lint.sh: clang-format, includes given twice, clang-tidy's bugprone checks)"
bash scripts/lint.sh || failed+=(lint)

echo "== ctest"
ctest --test-dir build --output-on-failure -j2 --timeout 600 || failed+=(ctest)

echo "== examples/release against the installed package (find_package(Proctor))"
example=$(mktemp -d)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# ccache rewrites paths under its base directory relative, so the objects of the last run,
# made under another temporary directory, are found again.
basedir=${CCACHE_BASEDIR:-$example}
if cmake --install build --prefix "$example/prefix" >/dev/null &&
  cmake -S examples/release -B "$example/build" -DCMAKE_PREFIX_PATH="$example/prefix" \
    "${launcher[@]}" >/dev/null &&
  CCACHE_BASEDIR=$basedir cmake --build "$example/build" -j"${JOBS:-2}" >/dev/null &&
  "$example/build/release_test"; then
  echo "example: passed"
else
  echo "example: FAILED" >&2
  failed+=(example)
fi
rm -rf "$example"

echo "== Debian packages (scripts/package.sh: lintian, contents, the systemd unit, its command line)"
deb_dir=$(mktemp -d)
bash scripts/package.sh "$deb_dir/out" || failed+=(package)
rm -rf "$deb_dir"

acceptance=../shared/acceptance
if [[ -d $acceptance ]]; then
  echo "== acceptance checks ($acceptance)"
  # The checks run against ./build/bin and must be started from the project's root.
  bash "$acceptance/run-all" || failed+=(acceptance)
else
  echo "== acceptance checks: $acceptance not found, skipped"
fi

echo "== sanitizers (scripts/sanitize.sh asan: ASan+UBSan, the unit suites and the engine suite)"
bash scripts/sanitize.sh asan || failed+=(sanitizers)

echo "== fuzzers (journal-record and wire-message decoding, ${FUZZ_SECONDS:-20} s each)"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}" || failed+=(fuzzers)

echo "== benchmark smoke run (proctor-bench --quick; figures are not checked)"
bench_dir=$(mktemp -d)
build/bin/proctor-bench --quick --data-dir "$bench_dir/run" >/dev/null || failed+=(benchmark)
rm -rf "$bench_dir"

if ((${#failed[@]} != 0)); then
  rc=1
  failed_tests=build/Testing/Temporary/LastTestsFailed.log
  if [[ " ${failed[*]} " == *" ctest "* && -f $failed_tests ]]; then
    echo "ctest: these failed (their output is above):" >&2
    sed 's/^/  /' "$failed_tests" >&2
  fi
  echo "test: FAILED: ${failed[*]}" >&2
else
  echo "test: all passed"
fi
exit "$rc"
