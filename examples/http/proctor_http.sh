#!/usr/bin/env bash
# A Proctor client in shell: curl and jq (docs/http-api.md). The same walk-through as
# proctor_http.py: submit a demo.ledger tree twice with one nonce (one tree), send an event
# to a demo.wait_event procedure suspended on it, long-poll both results, abort a third
# procedure, release the ended tree, read /metrics. Prints one JSON line with the ids;
# exits 1, saying why, at the first answer not as expected.
#
#   examples/http/proctor_http.sh http://127.0.0.1:8080 TOKEN /tmp/ledger
set -euo pipefail

url=${1:?usage: proctor_http.sh URL TOKEN LEDGER_DIR}
token=${2:?usage: proctor_http.sh URL TOKEN LEDGER_DIR}
ledger_dir=${3:?usage: proctor_http.sh URL TOKEN LEDGER_DIR}
body=$(mktemp)
trap 'rm -f "$body" "$body.code"' EXIT

fail() {
  echo "proctor_http.sh: FAILED: $*" >&2
  exit 1
}

# api METHOD PATH [JSON]: prints the answer's body; its HTTP status is then $(status).
api() {
  local args=(-sS -o "$body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $token"
    --max-time 75)
  if [[ $# -ge 3 ]]; then
    args+=(-H 'Content-Type: application/json' --data-binary "$3")
  fi
  curl "${args[@]}" "$url$2" >"$body.code" || fail "curl $1 $2"
  cat "$body"
}

status() {
  cat "$body.code"
}

# ok METHOD PATH [JSON]: api, failing unless the status is 2xx.
ok() {
  local out
  out=$(api "$@")
  [[ $(status) == 2* ]] || fail "$1 $2: HTTP $(status) $out"
  printf '%s' "$out"
}

# wait_end ID SECONDS: the status once the procedure ended (200), asking again on 202.
wait_end() {
  local deadline=$((SECONDS + $2)) out
  while ((SECONDS < deadline)); do
    out=$(ok GET "/api/procs/$1?wait=30s")
    if [[ $(status) == 200 ]]; then
      printf '%s' "$out"
      return
    fi
  done
  fail "procedure $1 did not end within $2 s"
}

# until_state ID STATE: polls the status (at most 30 s) until it is STATE.
until_state() {
  local deadline=$((SECONDS + 30))
  until [[ $(ok GET "/api/procs/$1" | jq -r .state) == "$2" ]]; do
    ((SECONDS < deadline)) || fail "procedure $1 did not reach $2"
    sleep 0.05
  done
}

submit() {  # submit JSON: the id
  ok POST /api/procs "$1" | jq -er .id
}

# A tree: a ledger with two children, submitted twice with one nonce.
nonce="sh-$$-$RANDOM$RANDOM"
tree_req=$(jq -nc --arg d "$ledger_dir" --arg n "$nonce" \
  '{type:"demo.ledger", args:{ledger_dir:$d, children:2, depth:1}, nonce:$n}')
tree=$(submit "$tree_req")
[[ $(submit "$tree_req") == "$tree" ]] || fail "a repeated nonce answered another id"

# A procedure suspended on an event; the event wakes it with its payload.
key="order-$$-$RANDOM-paid"
waiter=$(submit "$(jq -nc --arg k "$key" '{type:"demo.wait_event", args:{key:$k}}')")
until_state "$waiter" WAITING
ok POST /api/events "$(jq -nc --arg k "$key" '{key:$k, payload:{amount:42}}')" |
  jq -e '.accepted' >/dev/null || fail "event not accepted"
wait_end "$waiter" 60 | jq -e '.state == "SUCCESS" and .result == {amount:42}' >/dev/null ||
  fail "the waiter did not end SUCCESS with the payload"

wait_end "$tree" 60 | jq -e '.state == "SUCCESS"' >/dev/null || fail "the tree did not succeed"
ok GET "/api/trees/$tree" | jq -e '(.children | length) == 2 and .done == 2' >/dev/null ||
  fail "not a tree of two"

# A wait whose bound passes first is a 202 with the status then; an abort rolls it back.
stuck=$(submit "$(jq -nc --arg k "never-$$-$RANDOM" '{type:"demo.wait_event", args:{key:$k}}')")
ok GET "/api/procs/$stuck?wait=300ms" >/dev/null
[[ $(status) == 202 ]] || fail "a wait on a waiting procedure answered $(status)"
ok POST "/api/procs/$stuck/abort" | jq -e .accepted >/dev/null || fail "abort not accepted"
wait_end "$stuck" 60 | jq -e '.state == "ROLLEDBACK"' >/dev/null || fail "not rolled back"

# Errors: {"error","code"} with the HTTP status.
out=$(api POST /api/procs '{"type":"demo.ledger","args":{"steps":"three"}}')
[[ $(status) == 400 ]] || fail "bad args answered $(status) $out"
out=$(api POST /api/procs '{"type":"demo.ledger","priority":"high"}')
[[ $(status) == 400 && $(jq -r .field <<<"$out") == priority ]] ||
  fail "bad priority: $(status) $out"
out=$(api GET /api/procs/987654321)
[[ $(status) == 404 && $(jq -r .code <<<"$out") == NOT_FOUND ]] ||
  fail "unknown id: $(status) $out"

# The ended tree is released: it is gone.
ok POST "/api/procs/$tree/release" | jq -e .released >/dev/null || fail "release not done"
api GET "/api/procs/$tree" >/dev/null
[[ $(status) == 404 ]] || fail "a released tree answered $(status)"

ok GET /api/nodes | jq -e 'any(.[]; .self)' >/dev/null || fail "no node says it is itself"
metrics=$(ok GET /metrics)
grep -q '^# TYPE proctor_' <<<"$metrics" || fail "metrics are not Prometheus text"
jq -nc --argjson t "$tree" --argjson w "$waiter" --argjson s "$stuck" \
  '{tree:$t, waiter:$w, aborted:$s}'
