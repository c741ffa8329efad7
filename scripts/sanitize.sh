#!/usr/bin/env bash
# Builds test suites with sanitizers into their own build directory and runs them.
#
#   scripts/sanitize.sh [asan|tsan] [--quick]
#
# asan (the default): AddressSanitizer + UndefinedBehaviorSanitizer over the unit suites of
#   the layers up to actors/cluster and the executor's, the joins' and the engine suite (what
#   CI runs); --quick: the lower layers' only.
# tsan: ThreadSanitizer over the suites of the threaded parts: the journal's writer and store
#   (persistence_test), the Raft store and its loop and transports (replication_test,
#   raft_tls_test), the worker pool and scheduler (scheduling_test), peer links and the
#   outbox (cluster_test), calls (executor_test). Not in CI: its build is a third full one
#   (about 20 min cold here); run it before changing a threaded part (CONTRIBUTING.md).
# Build directories: build-asan/, build-tsan/ (ccache shared with the main build where the
# flags allow). Any report fails the run (exit 1). JOBS overrides the parallelism (2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=asan
quick=0
for a in "$@"; do
  case $a in
    asan | tsan) mode=$a ;;
    --quick) quick=1 ;;
    *)
      echo "usage: $0 [asan|tsan] [--quick]" >&2
      exit 64
      ;;
  esac
done

if [[ $mode == asan ]]; then
  flags=address,undefined
  # The suites of the layers up to actors/cluster; without --quick (CI), the executor's, the
  # joins' and the engine suite as well.
  suites=(procedures_test calendar_test persistence_test replication_test supervision_test
    wire_test base_test scheduling_test cluster_test)
  ((quick)) || suites+=(executor_test join_test engine_test)
  # Leaks: CAF's and RocksDB's process-wide singletons are freed by the OS, not at exit.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0:halt_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$PWD/scripts/ubsan.supp}
else
  flags=thread
  suites=(persistence_test replication_test raft_tls_test scheduling_test cluster_test
    executor_test)
  # CAF, RocksDB and spdlog are Debian's builds, not instrumented: their threads' handoffs
  # are invisible to TSan and suppressed (scripts/tsan.supp says why); what is left is ours.
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp}
fi
dir=build-$mode

launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# -O1 -g1 rather than RelWithDebInfo's -O2 -g: the sanitizers' usual level, line tables enough
# for their stack traces, and a cold build of these suites in about 60 % of the time
# (measured on one of the executor's files: 70 s against 123 s under load).
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DPROCTOR_SANITIZE="$flags" "${launcher[@]}" >/dev/null
targets=()
for s in "${suites[@]}"; do
  targets+=(--target "$s")
done
cmake --build "$dir" -j"${JOBS:-2}" "${targets[@]}"

rc=0
for s in "${suites[@]}"; do
  echo "== $mode: $s"
  # Process tests' binaries are not built here: a suite's tests that need them skip.
  if ! "$dir/bin/$s" --gtest_brief=1; then
    echo "sanitize: $s FAILED under $mode" >&2
    rc=1
  fi
done
exit $rc
