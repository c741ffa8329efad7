#!/usr/bin/env bash
# scripts/proctor-certs, the operators' certificate tool (docs/tls.md), and scripts/make-certs.sh
# built on it: a CA made once and never silently replaced, node, replica and client
# certificates that chain to it with the names and uses documented, refusals with exit 1 and
# bad usage with 64. Needs only bash and openssl; no build.
# Usage: certs_tool_test.sh [SOURCE_DIR]   Exit: 0 passed, 1 failed, 77 skipped (no openssl).
set -euo pipefail
src=$(realpath "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}")
tool=$src/scripts/proctor-certs
if ! command -v openssl >/dev/null; then
  echo "SKIPPED: openssl not found (apt-get install openssl; scripts/setup.sh does)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

failures=0
fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}
# expect CODE CMD...: runs CMD (its output in out.txt) and checks its exit status.
expect() {
  local want=$1 got=0
  shift
  "$@" >out.txt 2>&1 || got=$?
  if ((got != want)); then
    fail "exit $got, not $want: $* ($(head -c 400 out.txt))"
    return 1
  fi
}
# has_name FILE TEXT: TEXT is among the certificate's subjectAltName entries.
has_name() {
  openssl x509 -in "$1" -noout -ext subjectAltName | grep -qF -- "$2" ||
    fail "$1 does not name $2 (subjectAltName: $(openssl x509 -in "$1" -noout -ext subjectAltName | tail -n +2))"
}
has_use() {
  openssl x509 -in "$1" -noout -ext extendedKeyUsage | tail -n +2 | grep -qxF -- "    $2" ||
    fail "$1's uses are not exactly '$2': $(openssl x509 -in "$1" -noout -ext extendedKeyUsage)"
}

# -- the CA: made once ----------------------------------------------------------------------
expect 0 bash "$tool" init certs
for f in certs/ca.pem certs/ca.key; do [[ -s $f ]] || fail "init made no $f"; done
[[ $(stat -c %a certs/ca.key) == 600 ]] || fail "ca.key has mode $(stat -c %a certs/ca.key), not 600"
cp certs/ca.pem ca.pem.before
cp certs/ca.key ca.key.before
if expect 1 bash "$tool" init certs; then
  grep -q "certs/ca.key exists" out.txt || fail "the second init does not say why: $(cat out.txt)"
fi
if ! cmp -s certs/ca.pem ca.pem.before || ! cmp -s certs/ca.key ca.key.before; then
  fail "a refused init changed the CA"
fi

# -- certificates from it -------------------------------------------------------------------
expect 0 bash "$tool" node certs a
expect 0 bash "$tool" node certs core --replica core2 --host 10.0.0.5
expect 0 bash "$tool" client certs billing
for c in a core2 billing; do
  [[ -s certs/$c.pem && -s certs/$c.key ]] || fail "no certs/$c.pem and .key"
  [[ $(stat -c %a "certs/$c.key") == 600 ]] || fail "certs/$c.key is not mode 600"
  openssl verify -CAfile certs/ca.pem "certs/$c.pem" >/dev/null 2>&1 ||
    fail "certs/$c.pem does not verify against certs/ca.pem"
  # The key is the certificate's.
  [[ $(openssl pkey -in "certs/$c.key" -pubout) == $(openssl x509 -in "certs/$c.pem" -noout -pubkey) ]] ||
    fail "certs/$c.key does not belong to certs/$c.pem"
done
has_name certs/a.pem URI:proctor://node/a,
for n in DNS:localhost "IP Address:127.0.0.1" "IP Address:0:0:0:0:0:0:0:1"; do
  has_name certs/a.pem "$n"
done
has_use certs/a.pem "TLS Web Server Authentication, TLS Web Client Authentication"
has_name certs/core2.pem URI:proctor://node/core,
has_name certs/core2.pem URI:proctor://node/core/replica/core2
has_name certs/core2.pem "IP Address:10.0.0.5"
openssl x509 -in certs/core2.pem -noout -ext subjectAltName | grep -q localhost &&
  fail "--host replaces the default names, but core2.pem names localhost"
has_name certs/billing.pem URI:proctor://client/billing
has_use certs/billing.pem "TLS Web Client Authentication"
[[ $(openssl x509 -in certs/a.pem -noout -subject) == "subject=CN = proctor node a" ]] ||
  fail "a.pem's subject: $(openssl x509 -in certs/a.pem -noout -subject)"
if expect 0 bash "$tool" show certs/core2.pem; then
  for want in "proctor node core replica core2" "Proctor CA" "proctor://node/core/replica/core2" \
    "Server Authentication" " to "; do
    grep -qF "$want" out.txt || fail "show does not say '$want': $(cat out.txt)"
  done
fi

# -- refusals -------------------------------------------------------------------------------
cp certs/a.pem a.pem.before
if expect 1 bash "$tool" node certs a --host 10.0.0.9; then
  grep -q "certs/a.pem exists" out.txt || fail "re-issuing a does not say why: $(cat out.txt)"
fi
cmp -s certs/a.pem a.pem.before || fail "a refused node changed certs/a.pem"
expect 1 bash "$tool" client certs billing || true
expect 0 bash "$tool" node certs a --force --host 10.0.0.9 && has_name certs/a.pem "IP Address:10.0.0.9"
if expect 1 bash "$tool" node nowhere a; then
  grep -qF "run \`proctor-certs init nowhere\` first" out.txt ||
    fail "a node without a CA does not say to run init: $(cat out.txt)"
fi
[[ ! -e nowhere/a.pem ]] || fail "a node without a CA wrote nowhere/a.pem"
for usage in "" "frobnicate certs" "init" "init certs extra" "node certs" "client certs x --replica r" \
  "node certs 'b/c'" "node certs ca" "node certs b --host a,b" "node certs b --days soon" \
  "node certs b --days" "show" "init certs --bogus"; do
  eval "expect 64 bash \"\$tool\" $usage" || true
done
if expect 0 bash "$tool" --help; then
  grep -q "^usage: proctor-certs init DIR" out.txt || fail "--help does not show the usage"
fi
[[ -z $(find certs -name '.proctor-certs.*') ]] || fail "scratch directories left in certs/"

# -- make-certs.sh, the tests' throw-away set, made by proctor-certs ------------------------
if expect 0 bash "$src/scripts/make-certs.sh" set r1 x/r2; then
  got=$(find set -mindepth 1 -printf '%P\n' | sort | tr '\n' ' ')
  want="ca.key ca.pem client.key client.pem other-ca.key other-ca.pem other-client.key \
other-client.pem other-node.key other-node.pem r1.key r1.pem r2.key r2.pem "
  [[ $got == "$want" ]] || fail "make-certs.sh made: $got"
  for c in r1 r2 client; do
    openssl verify -CAfile set/ca.pem "set/$c.pem" >/dev/null 2>&1 || fail "set/$c.pem does not verify"
  done
  # NODE/REPLICA: replica r2 of node x; the other CA's node is node b's replica b3.
  openssl x509 -in set/r2.pem -noout -ext subjectAltName | grep -q "URI:proctor://node/x/replica/r2" ||
    fail "set/r2.pem does not name replica r2 of node x"
  openssl x509 -in set/other-node.pem -noout -ext subjectAltName |
    grep -q "URI:proctor://node/b/replica/b3" || fail "set/other-node.pem does not name node b's b3"
  for c in other-client other-node; do
    openssl verify -CAfile set/other-ca.pem "set/$c.pem" >/dev/null 2>&1 ||
      fail "set/$c.pem does not verify against other-ca.pem"
    openssl verify -CAfile set/ca.pem "set/$c.pem" >/dev/null 2>&1 &&
      fail "set/$c.pem verifies against ca.pem"
  done
  expect 0 bash "$src/scripts/make-certs.sh" set r1 x/r2 || true # a new set over the old one
fi
expect 64 bash "$src/scripts/make-certs.sh" || true

if ((failures)); then
  echo "certs_tool_test: $failures failure(s)"
  exit 1
fi
echo "certs_tool_test: passed"
