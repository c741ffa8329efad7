#!/usr/bin/env bash
# Makes a throw-away certificate authority and certificates for mutual TLS between Proctor
# nodes and clients (docs/tls.md), for tests and demos only: keys are unencrypted, the CA's
# key lies beside its certificate.
#
#   scripts/make-certs.sh DIR [NODE ...]      (nodes default to: a b c)
#
# DIR/ca.pem ca.key                 the CA
# DIR/NODE.pem NODE.key             one per node (server and client use: nodes connect too)
# DIR/client.pem client.key         for the proctor CLI
# DIR/other-ca.pem other-ca.key     a second, unrelated CA ...
# DIR/other-client.pem .key         ... a client certificate from it (refused by nodes)
# DIR/other-node.pem .key           ... and a node certificate from it (refused as a peer)
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
dir=$1
shift
nodes=("$@")
((${#nodes[@]})) || nodes=(a b c)
mkdir -p "$dir"
cd "$dir"
umask 077

days=825
curve=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

# make_ca NAME CN
make_ca() {
  openssl req -x509 "${curve[@]}" -keyout "$1.key" -out "$1.pem" -days "$days" \
    -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# make_leaf NAME CA CN EXTENDED_KEY_USAGE
make_leaf() {
  openssl req -new "${curve[@]}" -keyout "$1.key" -out "$1.csr" -subj "/CN=$3" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=$4" \
    "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
    -set_serial "0x$(openssl rand -hex 12)" -days "$days" -extfile "$1.ext" \
    -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

make_ca ca "Proctor throw-away CA"
for n in "${nodes[@]}"; do
  make_leaf "$n" ca "proctor node $n" serverAuth,clientAuth
done
make_leaf client ca "proctor client" clientAuth
make_ca other-ca "Another throw-away CA"
make_leaf other-client other-ca "proctor client" clientAuth
make_leaf other-node other-ca "proctor node" serverAuth,clientAuth
chmod 644 ./*.pem
echo "make-certs: CA, node(s) ${nodes[*]}, client and other-CA client and node in $(pwd)"
