#!/usr/bin/env bash
# Installs missing dependencies, then configures and builds Proctor into ./build
# (binaries in build/bin). JOBS overrides the parallelism (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"${JOBS:-2}"
