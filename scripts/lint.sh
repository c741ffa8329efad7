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
# set (a changed header brings in the .cpp files that include it; uncommitted changes count);
# else over all of them, the cache below passing those that passed before. Without the cache
# (PROCTOR_LINT_CACHE=0) and without --all, over those changed since
# `git merge-base HEAD origin/main` when there is an origin/main. PROCTOR_LINT_TIDY=0 skips
# clang-tidy. It needs a configured and built tree: build/compile_commands.json (CMake's
# CMAKE_EXPORT_COMPILE_COMMANDS) and the generated <proctor/*.pb.h> (PROCTOR_LINT_BUILD
# names another build directory). Sources not in compile_commands.json (the fuzzers, which
# only a clang build compiles; examples/release, a project of its own) are skipped, and
# named. JOBS: clang-tidy (and preprocessing) processes at once (default 2); clang-tidy takes
# 2-20 s per file, 10-18 min for all of them on 2 cores. At the end: how many files clang-tidy
# checked, how many the cache passed, and how long it all took.
#
# The cache, like ccache's: a file that passed (no finding) leaves a marker file named by its
# key, and is not checked again while its key is the same; a file with findings is checked
# every time. The key is the sha256 of the clang-tidy version, .clang-tidy, the file's compile
# command in compile_commands.json less its outputs (-o, -MD -MF ...), and the file as that
# command's compiler preprocesses it (-E, ~0.3 s of CPU a file), so a change in a header
# re-checks exactly the files that include it; with the bytes of every file read there too,
# since -E drops comments and so NOLINTs. The checkout's and the build's paths are replaced by
# names, so a clone in another folder (CI's) finds the same keys. The markers are under
# $PROCTOR_LINT_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/proctor-lint; 0 turns the
# cache off. A marker unused for 30 days is deleted. Not seen by the key: what only clang's
# preprocessor would read (#if __clang__ in a library header); remove the folder to start anew.
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

# The key of each file for clang-tidy's cache, in parallel: reads the files, one a line, from
# $2 and prints `KEY FILE` for each, in order; KEY is - (no caching) when the file cannot be
# preprocessed (why is said on stderr) or is not in the compile database.
# Args: BUILD LIST JOBS CLANG_TIDY_VERSION TIDY_ARG.
cache_keys_py='
import concurrent.futures, hashlib, json, os, re, shlex, subprocess, sys

build, listfile, jobs, version, tidy_arg = sys.argv[1:6]
root = os.getcwd()
# The checkout and the build named by what they are, not where they are: CI clones main
# into another folder each time, and must find the keys of the run before.
names = sorted({(p.encode(), n) for d, n in ((os.path.abspath(build), b"<build>"), (root, b"<root>"))
                for p in (d, os.path.realpath(d))}, key=lambda pn: -len(pn[0]))


def norm(b):
    for p, n in names:
        b = b.replace(p, n)
    return b


with open(".clang-tidy", "rb") as f:
    salt = b"\0".join([b"proctor-lint-cache 1", version.encode(), tidy_arg.encode(), f.read()])
db = {}
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    db[os.path.realpath(os.path.join(e.get("directory", ""), e["file"]))] = e
sums = {}  # path -> sha256 of its bytes, for every file any preprocessing read


def file_sum(path):
    if path not in sums:
        try:
            with open(path, "rb") as f:
                sums[path] = hashlib.sha256(f.read()).hexdigest().encode()
        except OSError:
            sums[path] = b"unreadable"
    return sums[path]


line_marker = re.compile(rb"^# \d+ \"((?:[^\"\\]|\\.)*)\"", re.M)


def key(f):
    e = db.get(os.path.realpath(f))
    if e is None:
        return "-", "not in compile_commands.json"
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    if os.path.basename(args[0]) in ("ccache", "sccache", "distcc", "icecc"):
        args = args[1:]  # a compiler launcher
    # The command less its outputs: the object (-o X) and the dependency file (-MD -MF X ...),
    # which would otherwise be written into the build.
    cmd, rest = args[:1], iter(args[1:])
    for a in rest:
        if a in ("-o", "-MF", "-MT", "-MQ"):
            next(rest, None)
        elif a not in ("-c", "-MD", "-MMD", "-MP") and not re.match(r"-(o|MF|MT|MQ).", a):
            cmd.append(a)
    wd = e.get("directory", ".")
    try:
        p = subprocess.run(cmd + ["-E", "-o", "-"], cwd=wd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:  # no such compiler or directory
        return "-", "not preprocessed: %s" % err
    if p.returncode != 0:
        why = p.stderr.decode(errors="replace").strip().splitlines()
        return "-", "not preprocessed: " + (why[0] if why else "exit %d" % p.returncode)
    h = hashlib.sha256(salt)
    h.update(b"\0" + norm("\0".join(cmd + [wd]).encode()) + b"\0")
    h.update(norm(p.stdout))
    # -E drops the comments, NOLINT ones too: the bytes of every file it read count as well.
    for named, path in sorted({(norm(m), m) for m in line_marker.findall(p.stdout)}):
        if not path.startswith(b"<"):  # <built-in>, <command-line>
            name = re.sub(rb"\\(.)", rb"\1", path).decode(errors="surrogateescape")
            h.update(b"\0" + named + b"\0" + file_sum(os.path.join(wd, name)))
    return h.hexdigest(), None


files = [f for f in open(listfile).read().split("\n") if f]
with concurrent.futures.ThreadPoolExecutor(max(1, int(jobs))) as pool:
    for f, (k, why) in zip(files, pool.map(key, files)):
        if why:
            print("tidy: %s: %s; checked without the cache" % (f, why), file=sys.stderr)
        print(k, f)
'

tidy_step() {  # sets rc=1 when clang-tidy finds something
  local t0 t1 keys_us=0 base build cache f c needle key marker tidy_rc hits
  local -a changed tus todo checked
  t0=${EPOCHREALTIME//[!0-9]/}
  build=${PROCTOR_LINT_BUILD:-build}
  cache=${XDG_CACHE_HOME:-${HOME:+$HOME/.cache}}
  cache=${PROCTOR_LINT_CACHE:-${cache:+$cache/proctor-lint}}
  if [[ -z $cache ]]; then
    echo "tidy: neither HOME nor XDG_CACHE_HOME nor PROCTOR_LINT_CACHE set: running without the cache"
  elif [[ $cache == 0 ]]; then
    cache=
  elif ! mkdir -p "$cache" 2>/dev/null || [[ ! -w $cache ]]; then
    echo "tidy: cache $cache is not a writable directory: running without it"
    cache=
  fi
  base=
  if [[ -n ${PROCTOR_LINT_BASE:-} ]]; then
    if ! base=$(git rev-parse -q --verify "$PROCTOR_LINT_BASE^{commit}"); then
      echo "tidy: PROCTOR_LINT_BASE=$PROCTOR_LINT_BASE is not a commit" >&2
      exit 64
    fi
  elif ((!all)) && [[ -z $cache ]] && git rev-parse -q --verify origin/main >/dev/null; then
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
    return
  fi
  if [[ ! -f $build/compile_commands.json ]]; then
    echo "tidy: $build/compile_commands.json not found: configure and build first (scripts/build.sh)" >&2
    echo "tidy: FAILED" >&2
    rc=1
    return
  fi
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
  grep -v '^tidy: skipped' "$out/list" >"$out/tus" || true
  mapfile -t tus <"$out/tus"

  # The cache: each file's key (all "-" without the cache), then a file whose marker is there
  # passed before and is not checked again.
  : >"$out/keys"
  t1=${EPOCHREALTIME//[!0-9]/}
  if [[ -n $cache ]] && ((${#tus[@]} > 0)) &&
    ! python3 -c "$cache_keys_py" "$build" "$out/tus" "${JOBS:-2}" \
      "$("$clang_tidy" --version 2>&1 | grep -v 'Host CPU' || true)" "$tidy_arg" >"$out/keys"; then
    echo "tidy: computing the cache's keys failed (above): checking without the cache" >&2
    cache=
  fi
  if [[ -z $cache ]] && ((${#tus[@]} > 0)); then
    printf -- '- %s\n' "${tus[@]}" >"$out/keys"
  fi
  if [[ -n $cache ]]; then
    keys_us=$((${EPOCHREALTIME//[!0-9]/} - t1))
  fi
  hits=0
  todo=()
  checked=()
  while IFS=' ' read -r key f; do
    marker=$cache/${key:0:2}/$key
    if [[ $key != - && -f $marker ]]; then
      touch "$marker"  # used: kept from the pruning below
      hits=$((hits + 1))
    else
      todo+=("$key" "$f")
      checked+=("$f")
    fi
  done <"$out/keys"

  # shellcheck disable=SC2317  # called through xargs
  tidy_one() {  # KEY FILE: clang-tidy's findings on FILE to $out/<FILE with / as _>; a clean
    # pass leaves the marker $cache/<KEY's first 2 digits>/KEY (unless KEY is -).
    local log="$out/${2//\//_}" marker
    "$clang_tidy" -p "$build" --quiet "$tidy_arg" "$2" >"$log" 2>&1 || return 1
    if [[ $1 != - ]] && ! grep -qE ': (warning|error): ' "$log"; then
      marker=$cache/${1:0:2}/$1
      mkdir -p "${marker%/*}"
      printf '%s\n' "$2" >"$marker.$$" && mv -f "$marker.$$" "$marker"
    fi
  }
  export -f tidy_one
  export build out cache
  echo "clang-tidy over ${#checked[@]} file(s), ${JOBS:-2} at once; $hits passed before (cache)"
  tidy_rc=0
  if ((${#todo[@]} > 0)); then
    # shellcheck disable=SC2016  # $1 and $2 are the inner bash's
    printf '%s\0' "${todo[@]}" |
      xargs -0 -n2 -P"${JOBS:-2}" bash -c 'tidy_one "$1" "$2"' _ || tidy_rc=1
  fi
  for f in "${checked[@]}"; do
    # Without clang's "N warnings generated." chatter; a header's finding shows under each
    # file that includes it.
    grep -Ev '^[0-9]+ (warning|error)s? (and [0-9]+ (warning|error)s? )?generated\.$' \
      "$out/${f//\//_}" || true
  done | sed "s|^$PWD/||"
  if [[ -n $cache ]]; then
    find "$cache" -type f -mtime +30 -delete 2>/dev/null || true
  fi
  local us=$((${EPOCHREALTIME//[!0-9]/} - t0))
  printf 'tidy: %d file(s): %d checked by clang-tidy, %d cache hit(s); %d.%d s, %d.%d s of it the keys\n' \
    "${#tus[@]}" "${#checked[@]}" "$hits" $((us / 1000000)) $((us / 100000 % 10)) \
    $((keys_us / 1000000)) $((keys_us / 100000 % 10))
  if ((tidy_rc != 0)); then
    echo "tidy: FAILED" >&2
    rc=1
  else
    echo "tidy: ok"
  fi
}

echo "== tidy (clang-tidy, .clang-tidy)"
# Passed to clang-tidy, and part of the cache's key. -Wno-unknown-warning-option: the compile
# commands are GCC's (-Wno-restrict).
tidy_arg=--extra-arg=-Wno-unknown-warning-option
export tidy_arg
if [[ ${PROCTOR_LINT_TIDY:-1} == 0 ]]; then
  echo "tidy: skipped (PROCTOR_LINT_TIDY=0)"
else
  tidy_step
fi

if ((rc != 0)); then
  echo "lint: FAILED" >&2
else
  echo "lint: all passed"
fi
exit "$rc"
