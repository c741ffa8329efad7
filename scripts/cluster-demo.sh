#!/usr/bin/env bash
# The cluster demo. Builds Proctor, starts three nodes a, b, c on loopback (data and logs in
# ./cluster-demo-data), submits trees on a whose children are spread over the three nodes,
# kills node b with SIGKILL mid-run, shows the cluster waiting for it, restarts b on the same
# data dir, and checks that every tree ends as expected and the shared ledger holds exactly
# the files of the committed steps. Exits non-zero if anything did not end as expected.
#
#   SKIP_BUILD=1   use the existing build
#   BIN=DIR        take proctord / proctor from DIR (default: build/bin)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  bash scripts/build.sh
fi
BIN=${BIN:-$root/build/bin}
for b in proctord proctor; do
  [[ -x $BIN/$b ]] || { echo "cluster-demo: no $BIN/$b (build first)" >&2; exit 1; }
done

data=$root/cluster-demo-data
ledger=$data/ledger
rm -rf "$data"
mkdir -p "$ledger"
read -r -a ports < <(python3 -c 'import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
names=(a b c)
declare -A addr pid
for i in 0 1 2; do addr[${names[$i]}]=127.0.0.1:${ports[$i]}; pid[${names[$i]}]=; done

ctl() { "$BIN/proctor" --node "${addr[a]}" "$@"; }

start_node() {  # NAME: start it, wait until it answers
  local n=$1 peers="" p
  for p in "${names[@]}"; do [[ $p == "$n" ]] || peers+="${peers:+,}$p=${addr[$p]}"; done
  "$BIN/proctord" --data-dir "$data/$n" --listen "${addr[$n]}" --name "$n" --peers "$peers" \
    >>"$data/$n.log" 2>&1 &
  pid[$n]=$!
  for _ in $(seq 1 300); do
    "$BIN/proctor" --node "${addr[$n]}" list --local --json >/dev/null 2>&1 && return 0
    kill -0 "${pid[$n]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "cluster-demo: node $n did not come up; last lines of $data/$n.log:" >&2
  tail -n 20 "$data/$n.log" >&2
  return 1
}

stop_nodes() {  # SIGTERM, then SIGKILL whatever takes longer than 30 s
  local n alive
  for n in "${names[@]}"; do [[ -z ${pid[$n]} ]] || kill -TERM "${pid[$n]}" 2>/dev/null || true; done
  for _ in $(seq 1 300); do
    alive=0
    for n in "${names[@]}"; do
      [[ -n ${pid[$n]} ]] && kill -0 "${pid[$n]}" 2>/dev/null && alive=1
    done
    ((alive)) || break
    sleep 0.1
  done
  for n in "${names[@]}"; do
    [[ -n ${pid[$n]} ]] || continue
    kill -KILL "${pid[$n]}" 2>/dev/null || true
    wait "${pid[$n]}" 2>/dev/null || true
    pid[$n]=
  done
}
trap stop_nodes EXIT

up_of() {  # NAME: "true" / "false" as node a sees it
  ctl nodes --json 2>/dev/null | grep -o "\"name\":\"$1\"[^}]*\"up\":[a-z]*" | grep -o '[a-z]*$' || true
}
await_up() {  # NAME true|false: bounded wait (30 s) until node a sees NAME so
  for _ in $(seq 1 300); do
    [[ $(up_of "$1") == "$2" ]] && return 0
    sleep 0.1
  done
  echo "cluster-demo: node a never saw node $1 up=$2; last lines of $data/a.log and $data/$1.log:" >&2
  tail -n 20 "$data/a.log" "$data/$1.log" >&2
  return 1
}
show_nodes() {
  ctl nodes --json | sed 's/^\[//; s/\]$//; s/},{/}\n{/g' | sed 's/^/  /'
}

echo "== starting nodes a, b, c (data and logs: $data)"
for n in "${names[@]}"; do start_node "$n"; echo "node $n on ${addr[$n]}: pid ${pid[$n]}"; done
await_up b true
await_up c true
echo "node a sees b and c up"

# -- submit --------------------------------------------------------------------------------
ids=() expects=() files=() kinds=()
submit() {  # EXPECTED FILES KIND EXTRA_ARGS: a tree of 3 steps x (root + 6 children) on node a
  local id
  if id=$(ctl submit demo.ledger --args-json "{\"ledger_dir\":\"$ledger\",\"steps\":3,\"children\":6,\"depth\":1,\"step_sleep_ms\":300,$4}"); then
    ids+=("$id")
  else
    ids+=("-")
  fi
  expects+=("$1") files+=("$2") kinds+=("$3")
}
echo "== submitting on node a"
for _ in 1 2 3; do submit SUCCESS 21 "spread over a,b,c" '"spread":true'; done
submit SUCCESS 21 "least loaded node" '"place_on":"*"'
for _ in 1 2; do submit ROLLEDBACK 0 "spread, fails at 2" '"spread":true,"fail_at":2,"undo_log":true'; done
echo "submitted ${#ids[@]} trees of 1 root + 6 children x 3 steps (2 of them fail at the root's step 2)"

# -- crash and recover ---------------------------------------------------------------------
sleep 1
echo "== killing node b (pid ${pid[b]}) with SIGKILL mid-run"
kill -KILL "${pid[b]}" 2>/dev/null || echo "cluster-demo: node b had already exited" >&2
wait "${pid[b]}" 2>/dev/null || true
pid[b]=
await_up b false
echo "node a's view of the cluster:"
show_nodes
waiting=
for _ in $(seq 1 30); do
  waiting=$(ctl list --all --local --json | grep -o '{"id":[^{}]*"waiting_for":"[^"]*node b[^"]*"[^{}]*}' |
    head -n 1) && [[ -n $waiting ]] && break
  sleep 0.1
done
if [[ -n $waiting ]]; then
  child=$(grep -o '^{"id":[0-9]*' <<<"$waiting" | cut -d: -f2)
  echo "a child placed on b waits for it: proctor status $child"
  echo "  $(ctl status "$child")"
else
  echo "cluster-demo: no child on node a waits for node b (the trees may be done already)" >&2
fi

sleep 2
echo "== restarting node b on the same data dir"
start_node b
await_up b true
echo "node b pid ${pid[b]} is up again and node a sees it"

# -- results -------------------------------------------------------------------------------
echo "== waiting for every tree"
bad=0 rows=()
for i in "${!ids[@]}"; do
  id=${ids[$i]} final='' rc=- out=
  if [[ $id == - ]]; then
    final="submit failed"
  else
    rc=0
    out=$(ctl wait "$id" --timeout-s 120 2>&1) || rc=$?
    echo "$id (exit $rc): $out"
    final=$(grep -o '"state":"[A-Z_]*"' <<<"$out" | head -n 1 | cut -d'"' -f4) || true
    [[ -n $final ]] || final="? exit $rc"
  fi
  # files ROOT.ID.STEP of the root and its children (a child on another node names itself ROOT)
  n=0
  for p in $id $(grep -o '"children":\[[0-9,]*\]' <<<"$out" | head -n 1 | grep -o '[0-9]*'); do
    n=$((n + $(find "$ledger" -maxdepth 1 -name "*.$p.*" | wc -l)))
  done
  mark=ok
  if [[ $final != "${expects[$i]}" || $n != "${files[$i]}" ]]; then
    mark="<-- unexpected"
    bad=$((bad + 1))
  fi
  rows+=("$(printf '%-18s %-20s %-11s %-11s %5s %8s  %s' "$id" "${kinds[$i]}" "${expects[$i]}" \
    "$final" "$n" "${files[$i]}" "$mark")")
done
printf '%-18s %-20s %-11s %-11s %5s %8s\n' ID TREE EXPECTED FINAL FILES EXPECTED
printf '%s\n' "${rows[@]}"

echo "== ledger (one file per committed step; rolled-back steps leave none)"
want=0
for i in "${!ids[@]}"; do want=$((want + files[i])); done
total=$(find "$ledger" -mindepth 1 -maxdepth 1 ! -name undo.log | wc -l)
mark=ok
if [[ $total != "$want" ]]; then
  mark="<-- unexpected"
  bad=$((bad + 1))
fi
printf '%-44s %5s files, expected %5s  %s\n' "4 trees x 7 procedures x 3 steps, 2 undone" \
  "$total" "$want" "$mark"
if [[ -f $ledger/undo.log ]]; then
  echo "undos of the failing trees, by node: $(cut -d' ' -f1 "$ledger/undo.log" | sort | uniq -c |
    awk '{printf "%s %s  ", $2, $1}')"
fi

echo "== stopping the nodes with SIGTERM"
stop_nodes
if ((bad != 0)); then
  echo "cluster-demo: $bad unexpected outcome(s); node logs: $data/{a,b,c}.log" >&2
  exit 1
fi
echo "cluster-demo: every tree ended as expected after node b's SIGKILL + restart"
