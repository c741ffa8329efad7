#!/usr/bin/env bash
# Runs the operator's drills (docs/operations.md, "Drills"): node b as three TLS replicas and
# plain nodes w1 and w2 under load, through a leader's SIGKILL, a leader's freeze, a lost
# follower replaced at a new address, a lost majority recovered, a node lost, forgotten and
# started empty, and an online backup restored; then checks that nothing acknowledged was
# lost, that no id was handed out twice and that every tree ended. The same test runs in CI
# (process_test); this runs it alone, ROUNDS times (default 1), each with LOAD_MS of load
# between drills (default 3000).
#   bash scripts/drills.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${1:-1}
if [[ ! $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash scripts/drills.sh [ROUNDS]  (default 1)" >&2
  exit 2
fi
bash scripts/build.sh process_test
export PROCTOR_DRILL_LOAD_MS=${LOAD_MS:-3000}
# libraft needs O_DIRECT, which tmpfs lacks: keep the nodes' directories on a real disk.
export TMPDIR=${TMPDIR:-/var/tmp}
for ((i = 1; i <= rounds; i++)); do
  echo "== drills, round $i of $rounds"
  build/bin/process_test --gtest_filter='drills.*' --gtest_brief=0
done
