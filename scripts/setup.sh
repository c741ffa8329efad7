#!/usr/bin/env bash
# Installs Proctor's build dependencies on Debian bookworm. Idempotent: checks with dpkg-query
# first and runs apt-get (update + install) only when a package is missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
  build-essential g++ cmake pkg-config python3
  libcaf-dev libcaf-openssl0.17 libssl-dev openssl
  librocksdb-dev
  libhowardhinnant-date-dev tzdata  # schedules' time zones (calendar/zone.hpp)
  libraft-dev libuv1-dev liblz4-dev  # the replicated journal (persistence/raft_store.hpp)
  libprotobuf-dev protobuf-compiler
  libspdlog-dev
  libgtest-dev libgmock-dev
  libcli11-dev libcpp-httplib-dev
  libtomlplusplus-dev  # the --auth-policy file (actors/base/auth_policy.cpp; header-only use)
  libjemalloc-dev
  lintian curl  # the Debian packages' check (scripts/package.sh)
  ccache  # rebuilds, and a fresh clone of the project, find their objects again
  prometheus-cpp-dev nlohmann-json3-dev libsimdjson-dev
  prometheus  # promtool: the metrics_promtool test checks /metrics with `promtool check metrics`
  # the web console's browser test (tests/process/console_browser_test.py; skipped without them)
  chromium chromium-driver python3-selenium
  # the HTTP API's example clients (examples/http/, tests/process/http_clients_test.py; curl above)
  jq python3-requests
  clang-format-14 clang-tidy-14  # scripts/lint.sh
)

# The OpenAPI document's validator (tests/process/openapi_validate.sh, skipped without it):
# npm's, as bookworm packages none. Not fatal: the npm registry may be out of reach.
openapi_validator() {
  command -v validate-api >/dev/null 2>&1 && return 0
  local as=()
  [[ $(id -u) -ne 0 ]] && as=(sudo)
  { command -v npm >/dev/null 2>&1 ||
    { "${as[@]}" apt-get update && "${as[@]}" apt-get install -y --no-install-recommends npm; }; } &&
    "${as[@]}" npm install -g --no-audit --no-fund @seriousme/openapi-schema-validator@2.11.0 ||
    echo "setup: could not install validate-api (npm); openapi_validate will be skipped" >&2
}

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
  openapi_validator
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
openapi_validator
