#!/usr/bin/env bash
# Installs missing dependencies, then configures and builds Proctor into ./build (binaries in
# build/bin). With target names (`scripts/build.sh proctord proctor`) it builds only those and
# what they need; without, everything, the test suites included. JOBS overrides the
# parallelism (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
launcher=()
if command -v ccache >/dev/null; then
  # Objects are found again from another clone of the project (CI builds a fresh one).
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}"
targets=()
for t in "$@"; do
  targets+=(--target "$t")
done
cmake --build build -j"${JOBS:-2}" "${targets[@]}"
