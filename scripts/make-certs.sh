#!/usr/bin/env bash
# Makes a throw-away certificate authority and certificates for mutual TLS between Proctor
# nodes and clients (docs/tls.md), for tests and demos only: keys are unencrypted, the CA's
# key lies beside its certificate, and every run makes a new CA. Operators make a CA once and
# issue from it with scripts/proctor-certs (/usr/bin/proctor-certs), which this script runs.
#
#   scripts/make-certs.sh DIR [NODE | NODE/REPLICA ...]      (nodes default to: a b c)
#
# DIR/ca.pem ca.key                 the CA
# DIR/NODE.pem NODE.key             one per node (server and client use: nodes connect too)
# DIR/REPLICA.pem REPLICA.key       one per NODE/REPLICA: replica REPLICA of node NODE
# DIR/client.pem client.key         for the proctor CLI
# DIR/other-ca.pem other-ca.key     a second, unrelated CA ...
# DIR/other-client.pem .key         ... a client certificate from it (refused by nodes)
# DIR/other-node.pem .key           ... and a node certificate from it (refused as a peer),
#                                   naming node b, replica b3 (as the process tests run it)
#
# Needs Debian's openssl (scripts/setup.sh installs it).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 DIR [NODE ...]" >&2
  exit 64
fi
if ! command -v openssl >/dev/null 2>&1; then
  echo "make-certs: openssl not found (apt-get install openssl, or scripts/setup.sh)" >&2
  exit 69
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$1
shift
nodes=("$@")
((${#nodes[@]})) || nodes=(a b c)
mkdir -p "$dir"
cd "$dir"
umask 077

days=825
# The operators' tool (scripts/proctor-certs) makes every file; --force because this set is
# thrown away and made anew each time. Its lines are not wanted here, its errors are.
certs() { bash "$here/proctor-certs" "$@" --days "$days" --force >/dev/null; }

certs init . --cn "Proctor throw-away CA"
for n in "${nodes[@]}"; do
  if [[ $n == */* ]]; then
    certs node . "${n%%/*}" --replica "${n#*/}"
  else
    certs node . "$n"
  fi
done
certs client . client
# proctor-certs calls every CA ca.pem: the other CA is made in a directory of its own and
# moved in beside the first under the names the tests use.
other=$(mktemp -d .other-ca.XXXXXX)
certs init "$other" --cn "Another throw-away CA"
certs client "$other" other-client
certs node "$other" b --replica b3
mv -f "$other/ca.pem" other-ca.pem
mv -f "$other/ca.key" other-ca.key
mv -f "$other/b3.pem" other-node.pem
mv -f "$other/b3.key" other-node.key
mv -f "$other"/other-client.* .
rmdir "$other"
echo "make-certs: CA, node(s) ${nodes[*]}, client and other-CA client and node in $(pwd)"
