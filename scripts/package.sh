#!/usr/bin/env bash
# Builds the Debian packages (proctor, libproctor-dev; cmake/ProctorPackage.cmake) from ./build
# into OUT_DIR (default build/deb-out) and checks them: lintian reports no error, each package
# has what it must (and the packaged proctor-certs runs), the systemd unit passes
# `systemd-analyze verify`, and the packaged proctord starts from the unit's own command line
# with the packaged example settings.
# Usage: [BUILD_DIR=build] scripts/package.sh [OUT_DIR]   (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=$(realpath -m "${1:-build/deb-out}")
rm -rf "$out"
mkdir -p "$out"
(cd "${BUILD_DIR:-build}" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || {
  cat "$out/cpack.log" >&2
  echo "package: cpack failed" >&2
  exit 1
}
shopt -s nullglob
server=("$out"/proctor_*.deb)
dev=("$out"/libproctor-dev_*.deb)
if ((${#server[@]} != 1 || ${#dev[@]} != 1)); then
  echo "package: expected one proctor and one libproctor-dev package in $out" >&2
  exit 1
fi
echo "package: ${server[0]##*/}, ${dev[0]##*/}"

rc=0
if command -v lintian >/dev/null; then
  # Errors fail; warnings (systemctl in prerm) are shown.
  lintian --tag-display-limit 0 "${server[0]}" "${dev[0]}" 2>&1 | grep -v "root privileges" |
    tee "$out/lintian.txt" || true
  if grep -q '^E: ' "$out/lintian.txt"; then
    echo "package: lintian reports errors" >&2
    rc=1
  fi
else
  echo "package: lintian not installed (scripts/setup.sh installs it): not checked" >&2
  rc=1
fi

root="$out/root"
mkdir -p "$root"
dpkg-deb -x "${server[0]}" "$root"
dpkg-deb -x "${dev[0]}" "$root"
unit=usr/lib/systemd/system/proctord@.service
for f in usr/bin/proctord usr/bin/proctor usr/bin/proctor-certs "$unit" \
  usr/share/doc/proctor/examples/node.toml usr/share/man/man1/proctord.1.gz \
  usr/share/man/man1/proctor.1.gz usr/share/man/man1/proctor-certs.1.gz \
  usr/share/doc/proctor/copyright usr/include/proctor/state_machine.hpp \
  usr/lib/cmake/Proctor/ProctorConfig.cmake; do
  if [[ ! -e $root/$f ]]; then
    echo "package: /$f is missing" >&2
    rc=1
  fi
done
# proctor-certs is a script, not a target: it must be installed executable and run as shipped.
if [[ -e $root/usr/bin/proctor-certs ]] && ! "$root/usr/bin/proctor-certs" --help >/dev/null 2>&1; then
  echo "package: /usr/bin/proctor-certs does not run (not executable?)" >&2
  rc=1
fi
# The manual ships whole: every relative link of its pages (outside code) leads to a file
# the package has.
docdir=$root/usr/share/doc/proctor
if [[ ! -e $docdir/docs/operations.md ]]; then
  echo "package: /usr/share/doc/proctor/docs/ (the manual) is missing" >&2
  rc=1
fi
python3 - "$docdir" "$root" <<'EOF' || rc=1
import pathlib, re, sys
docdir, root = pathlib.Path(sys.argv[1]), sys.argv[2]
bad = 0
for md in sorted(docdir.rglob("*.md")):
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)  # fenced code
    text = re.sub(r"`[^`]*`", "", text)                          # inline code
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = target.split("#")[0]
        if path and "://" not in path and not path.startswith("mailto:") \
                and not (md.parent / path).exists():
            print(f"package: {str(md)[len(root):]} links to {path}, which the package does "
                  "not have", file=sys.stderr)
            bad += 1
sys.exit(1 if bad else 0)
EOF
# The list is read whole first: `grep -q` in a pipeline under pipefail fails the pipeline when
# it exits before tar has written everything (tar dies of SIGPIPE), which once reported a
# prerm that was there as missing.
control=$(dpkg-deb --ctrl-tarfile "${server[0]}" | tar -t)
for script in postinst prerm postrm; do
  if ! grep -qx "\./$script" <<<"$control"; then
    echo "package: the proctor package has no $script" >&2
    rc=1
  fi
done

# The unit as installed, its binary taken from the extracted package (verify checks that
# ExecStart's program exists and is executable).
instance="$out/proctord@a.service"
sed "s|/usr/bin/proctord|$root/usr/bin/proctord|" "$root/$unit" >"$instance"
if command -v systemd-analyze >/dev/null; then
  if ! verify=$(systemd-analyze verify "$instance" 2>&1) || [[ -n $verify ]]; then
    echo "package: systemd-analyze verify proctord@.service: $verify" >&2
    rc=1
  else
    echo "package: systemd-analyze verify: clean"
  fi
else
  echo "package: systemd-analyze not found: the unit is not verified"
fi

# A refused start (exit 1) and a configuration error (64) fail the same way every time: the
# unit must not restart them in a loop (systemd-analyze verify does not check this).
prevent=$(sed -n 's/^RestartPreventExitStatus=//p' "$instance")
for code in 1 64; do
  if ! grep -qw "$code" <<<"$prevent"; then
    echo "package: proctord@.service restarts on exit $code (RestartPreventExitStatus='$prevent')" >&2
    rc=1
  fi
done

# The packaged proctord started as the unit starts it (ExecStart, %i = a), with the example
# settings (its addresses moved to free loopback ports): it must serve.
exec_start=$(sed -n 's/^ExecStart=//p' "$instance")
conf="$out/a.toml"
http_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -e "s|^listen = .*|listen = \"127.0.0.1:0\"|" -e "s|^peers = .*||" \
  -e "s|^http = .*|http = \"127.0.0.1:$http_port\"|" -e "s|^http-token-file = .*||" \
  "$root/usr/share/doc/proctor/examples/node.toml" >"$conf"
cmd=${exec_start//\/etc\/proctor\/%i.toml/$conf}
cmd=${cmd//\/var\/lib\/proctor\/%i/$out/data-a}
cmd=${cmd//%i/a}
# shellcheck disable=SC2086  # the unit's command line, split as systemd splits it
$cmd >"$out/proctord.log" 2>&1 &
pid=$!
served=0
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$http_port/metrics" >/dev/null 2>&1; then
    served=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
if ((served == 0)); then
  echo "package: proctord started as the unit starts it did not serve:" >&2
  cat "$out/proctord.log" >&2
  rc=1
else
  echo "package: the unit's command line with the example settings serves"
fi
rm -rf "$root"
exit "$rc"
