#!/usr/bin/env bash
# The main job. Builds Proctor, starts a node on embedded RocksDB in ./demo-data, submits a
# mix of procedures, kills the node with SIGKILL mid-run, restarts it on the same data dir,
# and checks that every procedure ends as expected and the demo ledgers hold exactly the
# files of the committed steps. Exits non-zero if anything did not end as expected.
#
#   SKIP_BUILD=1   use the existing build
#   BIN=DIR        take proctord / proctor from DIR (default: build/bin)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  bash scripts/build.sh proctord proctor  # only what the demo runs, not the test suites
fi
BIN=${BIN:-$root/build/bin}
for b in proctord proctor; do
  [[ -x $BIN/$b ]] || { echo "demo: no $BIN/$b (build first)" >&2; exit 1; }
done

data=$root/demo-data
rm -rf "$data"
mkdir -p "$data/ledger" "$data/trees" "$data/rollback" "$data/flaky"
log=$data/node.log
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
node=127.0.0.1:$port
node_pid=

ctl() { "$BIN/proctor" --node "$node" "$@"; }

start_node() {
  "$BIN/proctord" --data-dir "$data/node" --listen "$node" >>"$log" 2>&1 &
  node_pid=$!
  for _ in $(seq 1 300); do
    ctl list --json >/dev/null 2>&1 && return 0
    kill -0 "$node_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "demo: proctord did not come up; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  return 1
}

stop_node() {  # SIGTERM, then SIGKILL if it takes longer than 30 s
  [[ -n $node_pid ]] || return 0
  kill -TERM "$node_pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$node_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$node_pid" 2>/dev/null || true
  wait "$node_pid" 2>/dev/null || true
  node_pid=
}
trap stop_node EXIT

# -- submit --------------------------------------------------------------------------------
ids=() types=() expects=()
submit() {  # EXPECTED TYPE ARGS_JSON
  local id
  if id=$(ctl submit "$2" --args-json "$3"); then
    ids+=("$id")
  else
    ids+=("-")
  fi
  types+=("$2")
  expects+=("$1")
}

echo "== starting proctord on $node (data: $data/node, log: $log)"
start_node
echo "proctord pid $node_pid is up"

echo "== submitting"
for _ in $(seq 1 40); do
  submit SUCCESS demo.ledger "{\"steps\":5,\"ledger_dir\":\"$data/ledger\",\"step_sleep_ms\":20}"
done
for _ in 1 2; do
  submit SUCCESS demo.ledger \
    "{\"steps\":3,\"children\":3,\"depth\":2,\"ledger_dir\":\"$data/trees\",\"step_sleep_ms\":100}"
done
submit ROLLEDBACK demo.ledger \
  "{\"steps\":3,\"children\":3,\"depth\":2,\"fail_at\":2,\"ledger_dir\":\"$data/rollback\",\"step_sleep_ms\":100}"
for _ in 1 2; do
  submit SUCCESS demo.flaky "{\"crash_times\":2,\"ledger_dir\":\"$data/flaky\"}"
done
submit SUCCESS demo.wait_event '{"key":"demo-go"}'
echo "submitted ${#ids[@]} roots: 40 ledgers of 5 steps, 2 ledger trees of 13, 1 failing tree," \
  "2 flaky, 1 event waiter"

# -- crash and recover ---------------------------------------------------------------------
sleep 1
states() {  # how many procedures (children included) are in each state right now
  ctl list --all --json 2>/dev/null | grep -o '"state":"[A-Z_]*"' | cut -d'"' -f4 | sort | uniq -c |
    awk '{printf "%s %s  ", $1, $2} END {print ""}'
}
echo "== before the kill: $(states)"
echo "killing proctord (pid $node_pid) with SIGKILL mid-run"
kill -KILL "$node_pid" 2>/dev/null || echo "demo: proctord had already exited" >&2
wait "$node_pid" 2>/dev/null || true
node_pid=

echo "== restarting proctord on the same data dir"
start_node
echo "proctord pid $node_pid is up again: $(states)"

echo "== sending event demo-go"
ctl event demo-go --payload-json '{"hello":"world"}' || echo "demo: event failed" >&2

# -- results -------------------------------------------------------------------------------
echo "== waiting for every procedure"
bad=0
printf '%-8s %-18s %-12s %-16s %s\n' ID TYPE EXPECTED FINAL ""
for i in "${!ids[@]}"; do
  id=${ids[$i]} final=
  if [[ $id == - ]]; then
    final="submit failed"
  else
    out=$(ctl wait "$id" --timeout-s 120 2>&1) || true
    final=$(grep -o '"state":"[A-Z_]*"' <<<"$out" | head -n 1 | cut -d'"' -f4) || true
    [[ -n $final ]] || final="? ${out:0:60}"
  fi
  mark=ok
  if [[ $final != "${expects[$i]}" ]]; then
    mark="<-- unexpected"
    bad=$((bad + 1))
  fi
  printf '%-8s %-18s %-12s %-16s %s\n' "$id" "${types[$i]}" "${expects[$i]}" "$final" "$mark"
done

echo "== ledgers (one file per committed step; rolled-back steps leave none)"
check_ledger() {  # DIR EXPECTED WHAT
  local n
  n=$(find "$1" -mindepth 1 -maxdepth 1 | wc -l)
  local mark=ok
  if [[ $n != "$2" ]]; then
    mark="<-- unexpected"
    bad=$((bad + 1))
  fi
  printf '%-44s %5s files, expected %5s  %s\n' "$3" "$n" "$2" "$mark"
}
check_ledger "$data/ledger" $((40 * 5)) "40 ledgers x 5 steps"
check_ledger "$data/trees" $((2 * 13 * 3)) "2 trees x 13 procedures x 3 steps"
check_ledger "$data/rollback" 0 "failing tree, rolled back"

echo "== stopping proctord (pid $node_pid) with SIGTERM"
stop_node
if ((bad != 0)); then
  echo "demo: $bad unexpected outcome(s); node log: $log" >&2
  exit 1
fi
echo "demo: every procedure ended as expected after SIGKILL + restart"
