#!/usr/bin/env bash
# Installs Proctor's build dependencies on Debian bookworm. Idempotent: checks with dpkg-query
# first and runs apt-get (update + install) only when a package is missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
  build-essential g++ cmake pkg-config python3
  libcaf-dev libcaf-openssl0.17 libssl-dev openssl
  librocksdb-dev
  libraft-dev libuv1-dev liblz4-dev  # the replicated journal (persistence/raft_store.hpp)
  libprotobuf-dev protobuf-compiler
  libspdlog-dev
  libgtest-dev libgmock-dev
  libcli11-dev libcpp-httplib-dev
  libjemalloc-dev
  lintian curl  # the Debian packages' check (scripts/package.sh)
  ccache  # rebuilds, and a fresh clone of the project, find their objects again
  prometheus-cpp-dev nlohmann-json3-dev libsimdjson-dev
  # the web console's browser test (tests/process/console_browser_test.py; skipped without them)
  chromium chromium-driver python3-selenium
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: not a Debian system (no dpkg-query); install these yourself: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} build dependencies are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo --preserve-env=DEBIAN_FRONTEND)
  else
    echo "setup: missing packages (${missing[*]}) and not root; run this script as root" >&2
    exit 1
  fi
fi
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
