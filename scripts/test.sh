#!/usr/bin/env bash
# Builds Proctor, runs the whole GoogleTest suite through ctest, then the black-box
# acceptance checks in ../shared/acceptance when that directory exists next to the project.
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

if ((rc != 0)); then
  echo "test: FAILED" >&2
else
  echo "test: all passed"
fi
exit "$rc"
