#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) into build/fuzz and runs
# each for SECONDS (default 20) from a fresh seed corpus: the seeds its *_seeds tool writes,
# plus tests/fuzz/corpus/<name>/ when present. Fails, naming the input, if any target found a
# crash, a sanitizer report, a broken invariant, a leak, a timeout or an out-of-memory input.
#   bash scripts/fuzz.sh [SECONDS]
# Installs clang and its runtimes with apt-get when missing (Debian; as root, or via sudo).
# JOBS overrides the build parallelism (default 2). Logs: build/fuzz/run/<name>/log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-20}
if [[ ! $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash scripts/fuzz.sh [SECONDS]  (SECONDS per target, default 20)" >&2
  exit 2
fi
targets=(journal_record wire_message cron auth_policy)

# -- toolchain -----------------------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
# Strict: also fail on records that do not survive a write and read back, and on errors
# that are not one line.
export PROCTOR_FUZZ_STRICT=${PROCTOR_FUZZ_STRICT:-1}
packages=(clang libclang-rt-14-dev cmake make libprotobuf-dev protobuf-compiler librocksdb-dev
  libhowardhinnant-date-dev tzdata libssl-dev libtomlplusplus-dev)
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in "${packages[@]}"; do
    if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} > 0)); then
    echo "fuzz: installing ${missing[*]}"
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
      if ! command -v sudo >/dev/null 2>&1; then
        echo "fuzz: missing packages (${missing[*]}) and not root; run this script as root" >&2
        exit 1
      fi
      sudo=(sudo --preserve-env=DEBIAN_FRONTEND)
    fi
    "${sudo[@]}" apt-get update
    "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# -- build ---------------------------------------------------------------------------------
echo "== fuzz: building tests/fuzz into build/fuzz"
CC=clang CXX=clang++ cmake -S tests/fuzz -B build/fuzz >/dev/null
cmake --build build/fuzz -j"${JOBS:-2}"

# -- run -----------------------------------------------------------------------------------
# The targets run at once, each on a fresh copy of its corpus.
declare -A pids
for name in "${targets[@]}"; do
  work=build/fuzz/run/$name
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  "build/fuzz/${name}_seeds" "$work/corpus"
  if [[ -d tests/fuzz/corpus/$name ]]; then
    cp -r tests/fuzz/corpus/"$name"/. "$work/corpus/"
  fi
  echo "== fuzz: $name for ${seconds}s ($(find "$work/corpus" -type f | wc -l) seed inputs)"
  "build/fuzz/${name}_fuzzer" "$work/corpus" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=30 -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/log" 2>&1 &
  pids[$name]=$!
done

rc=0
for name in "${targets[@]}"; do
  work=build/fuzz/run/$name
  status=0
  wait "${pids[$name]}" || status=$?
  findings=$(find "$work/artifacts" -type f | sort)
  if ((status == 0)) && [[ -z $findings ]]; then
    echo "fuzz: $name: no findings ($(grep -Eo '^stat::number_of_executed_units: [0-9]+' \
      "$work/log" | grep -Eo '[0-9]+' || echo '?') runs; log $work/log)"
    continue
  fi
  rc=1
  echo "fuzz: $name: FAILED (exit status $status; log $work/log)" >&2
  # The sanitizer or invariant report, without libFuzzer's progress lines.
  grep -Ev '^#[0-9]+' "$work/log" | tail -n 60 >&2
  for f in $findings; do
    echo "fuzz: $name: finding $f ($(stat -c %s "$f") bytes), first bytes in hex:" >&2
    head -c 256 "$f" | od -An -tx1 -v >&2
    echo "fuzz: reproduce with: build/fuzz/${name}_fuzzer $f" >&2
  done
done

if ((rc != 0)); then
  echo "fuzz: FAILED" >&2
else
  echo "fuzz: all targets passed"
fi
exit "$rc"
