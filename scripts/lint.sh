#!/usr/bin/env bash
# Format and lint checks (CI). Every check runs, so one report shows everything; exit 1 if any
# finds something. Findings are printed as FILE:LINE: what is wrong.
#
#   format    every tracked *.cpp/*.hpp/*.h is as clang-format 14 writes it with .clang-format
#             (layout, and includes sorted and grouped: own header, C system, C++ standard,
#             third-party, <proctor/...>, "project"). Fix: clang-format -i FILE (the whole
#             file), or `git clang-format` for the lines you changed only.
#   includes  no file includes the same header twice. Fix: delete the later #include.
#   tidy      clang-tidy with .clang-tidy (bugprone checks: use after move, dangling
#             string_view/span handles, ...; every finding is an error). Fix the code; for a
#             false positive, `// NOLINT(check-name): why` on the line, or
#             `// NOLINTNEXTLINE(check-name): why` above it.
#
#   scripts/lint.sh [--all]
#
# clang-tidy runs over the .cpp files changed since $PROCTOR_LINT_BASE (a commit) when it is
# set; else over all of them with --all; else over those changed since
# `git merge-base HEAD origin/main`, or all of them when there is no origin/main. A changed
# header brings in the .cpp files that include it. Uncommitted changes count as changes.
# It needs a configured and built tree: build/compile_commands.json (CMake's
# CMAKE_EXPORT_COMPILE_COMMANDS) and the generated <proctor/*.pb.h> (PROCTOR_LINT_BUILD
# names another build directory). Sources not in compile_commands.json (the fuzzers, which
# only a clang build compiles; examples/release, a project of its own) are skipped, and
# named. JOBS: clang-tidy processes at once (default 2); one takes 2-20 s per file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all=0
for a in "$@"; do
  case $a in
    --all) all=1 ;;
    *)
      echo "usage: $0 [--all]" >&2
      exit 64
      ;;
  esac
done

# Generated or vendored sources excluded from the checks (an extended regex on the path). None
# is tracked today: protobuf's output and the console's embedded files land in the build.
exclude='^(build[^/]*)/'

# The layout is clang-format 14's (another version lays some lines out differently), and
# .clang-tidy was measured with clang-tidy 14: Debian bookworm's clang-format-14, clang-tidy-14.
clang_format=$(command -v clang-format-14 || command -v clang-format || echo clang-format)
clang_tidy=$(command -v clang-tidy-14 || command -v clang-tidy || echo clang-tidy)
export clang_tidy

rc=0
files=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] && files+=("$f")  # a file deleted but not yet committed is not checked
done < <(git ls-files -z -- '*.cpp' '*.hpp' '*.h' | grep -zEv "$exclude")

echo "== format (${clang_format##*/} --dry-run --Werror, .clang-format: ${#files[@]} files)"
# One line per file: its first unformatted line and how many places differ.
if out=$("$clang_format" --dry-run --Werror --style=file -- "${files[@]}" 2>&1); then
  echo "format: ok"
else
  summary=$(printf '%s\n' "$out" | awk -F: '
    /^[^ ].*:[0-9]+:[0-9]+: (error|warning): / {
      if (!($1 in n)) { first[$1] = $2; order[++k] = $1 }
      n[$1]++
    }
    END {
      for (i = 1; i <= k; i++)
        printf "%s:%s: not clang-formatted (%d place%s); fix: clang-format -i %s\n",
          order[i], first[order[i]], n[order[i]], n[order[i]] == 1 ? "" : "s", order[i]
    }')
  # Nothing in the usual form (an unreadable .clang-format?): clang-format's own words.
  printf '%s\n' "${summary:-$out}"
  echo "format: FAILED" >&2
  rc=1
fi

echo "== includes (a header included twice in one file)"
# The header as written between its <> or "", so <a.hpp> and "a.hpp" count as the same one.
if dups=$(awk '
    FNR == 1 { split("", seen) }
    match($0, /^[ \t]*#[ \t]*include[ \t]*[<"][^>"]+[>"]/) {
      h = substr($0, RSTART, RLENGTH)
      sub(/^[ \t]*#[ \t]*include[ \t]*[<"]/, "", h)
      sub(/[>"]$/, "", h)
      if (h in seen)
        printf "%s:%d: %s is included again (first at line %d); fix: delete this line\n",
          FILENAME, FNR, h, seen[h]
      else
        seen[h] = FNR
    }' "${files[@]}") && [[ -z $dups ]]; then
  echo "includes: ok"
else
  printf '%s\n' "$dups"
  echo "includes: FAILED" >&2
  rc=1
fi

echo "== tidy (clang-tidy, .clang-tidy)"
build=${PROCTOR_LINT_BUILD:-build}
base=
if [[ -n ${PROCTOR_LINT_BASE:-} ]]; then
  if ! base=$(git rev-parse -q --verify "$PROCTOR_LINT_BASE^{commit}"); then
    echo "tidy: PROCTOR_LINT_BASE=$PROCTOR_LINT_BASE is not a commit" >&2
    exit 64
  fi
elif ((!all)) && git rev-parse -q --verify origin/main >/dev/null; then
  base=$(git merge-base HEAD origin/main)
fi
if [[ -n $base ]]; then
  changed=()
  while IFS= read -r -d '' f; do
    [[ -f $f ]] || continue
    case $f in
      *.cpp) changed+=("$f") ;;
      *.hpp | *.h)
        # The .cpp files that include it, as a project header or as a public <proctor/...>.
        if [[ $f == include/* ]]; then needle="<${f#include/}>"; else needle="\"$f\""; fi
        while IFS= read -r -d '' c; do changed+=("$c"); done \
          < <(git grep -z -l -F -- "$needle" -- '*.cpp' || true)
        ;;
    esac
  done < <(git diff -z --name-only --diff-filter=d "$base" -- '*.cpp' '*.hpp' '*.h' |
    grep -zEv "$exclude" || true)
  if ((${#changed[@]} > 0)); then
    mapfile -t changed < <(printf '%s\n' "${changed[@]}" | sort -u)
  fi
  echo "changed since ${base:0:12}: ${#changed[@]} .cpp file(s), with those including a changed header"
else
  changed=()
  for f in "${files[@]}"; do
    [[ $f == *.cpp ]] && changed+=("$f")
  done
  echo "all files: ${#changed[@]} .cpp file(s)"
fi

if ((${#changed[@]} == 0)); then
  echo "tidy: nothing to check"
elif [[ ! -f $build/compile_commands.json ]]; then
  echo "tidy: $build/compile_commands.json not found: configure and build first (scripts/build.sh)" >&2
  echo "tidy: FAILED" >&2
  rc=1
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  # The files to check that the build compiles; the others are named.
  printf '%s\n' "${changed[@]}" | python3 -c '
import json, os, sys
build, root = sys.argv[1], os.getcwd()
known = {os.path.realpath(os.path.join(e.get("directory", ""), e["file"]))
         for e in json.load(open(os.path.join(build, "compile_commands.json")))}
for f in sys.stdin.read().split("\n"):
    if f and os.path.realpath(os.path.join(root, f)) in known:
        print(f)
    elif f:
        print("tidy: skipped (not in compile_commands.json): " + f)
' "$build" >"$out/list"
  grep '^tidy: skipped' "$out/list" || true
  mapfile -t tus < <(grep -v '^tidy: skipped' "$out/list" || true)
  # shellcheck disable=SC2317  # called through xargs
  tidy_one() {  # FILE: clang-tidy's findings on it to $out/<FILE with / as _>
    local log="$out/${1//\//_}"
    # -Wno-unknown-warning-option: the compile commands are GCC's (-Wno-restrict).
    "$clang_tidy" -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option "$1" >"$log" 2>&1
  }
  export -f tidy_one
  export build out
  echo "clang-tidy over ${#tus[@]} file(s), ${JOBS:-2} at once"
  tidy_rc=0
  if ((${#tus[@]} > 0)); then
    # shellcheck disable=SC2016  # $1 is the inner bash's
    printf '%s\0' "${tus[@]}" |
      xargs -0 -n1 -P"${JOBS:-2}" bash -c 'tidy_one "$1"' _ || tidy_rc=1
  fi
  for f in "${tus[@]}"; do
    # Without clang's "N warnings generated." chatter; a header's finding shows under each
    # file that includes it.
    grep -Ev '^[0-9]+ (warning|error)s? (and [0-9]+ (warning|error)s? )?generated\.$' \
      "$out/${f//\//_}" || true
  done | sed "s|^$PWD/||"
  if ((tidy_rc != 0)); then
    echo "tidy: FAILED" >&2
    rc=1
  else
    echo "tidy: ok"
  fi
fi

if ((rc != 0)); then
  echo "lint: FAILED" >&2
else
  echo "lint: all passed"
fi
exit "$rc"
