#!/usr/bin/env python3
"""Every `proctor` command line the docs show parses as the CLI takes it.

Collects the `proctor ...` command lines of README.md and docs/*.md (lines of fenced code
blocks, and inline code spans), puts real values in for their placeholders (ID, KEY, TYPE,
JSON, ...) and runs each against a real proctord. A command may fail for what it asks (an
unknown type, a node that is not a peer: exit 1), but never as a usage error (exit 64): that
is a documented syntax the CLI does not take (`proctor event KEY PAYLOAD` was one). Synopsis
lines with [optional] parts or alternatives are left out.

    docs_commands_test.py --bin BUILD/bin [--root PROJECT]
"""
import argparse
import glob
import os
import re
import shlex
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import Failure, Node, SKIP, check, wait_until  # noqa: E402

USAGE = 64

# A placeholder (as the docs spell them) and what stands in for it.
def placeholders(ended_id):
    return {
        "ID": ended_id, "ROOT": ended_id, "$id": ended_id, "${id}": ended_id,
        "KEY": "docs-key", "TYPE": "demo.noop", "NAME": "docs-name", "JSON": "{}",
        "PATH": "/nonexistent/args.json", "N": "1", "S": "RUNNABLE", "STR": "docs-nonce",
        "CRON": "0 0 * * *", "ZONE": "UTC", "T": "1h", "D": "1h", "SECONDS": "1", "MS": "1",
        "PAYLOAD": '"x"', "FILE": "/nonexistent", "DIR": "/nonexistent",
    }


def command_lines(root):
    """(file, line number, text, whole) of each documented `proctor` command line; `whole` for
    a line of a code block (an inline span may name a command without its arguments)."""
    out = []
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    span = re.compile(r"`(?:build/bin/)?(proctor [^`]+)`")
    for path in files:
        fenced = False
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                    continue
                if fenced:
                    text = line.strip()
                    for prefix in ("build/bin/", "$ "):
                        if text.startswith(prefix):
                            text = text[len(prefix):]
                    m = re.match(r"(?:\w+=\$\()?(proctor .*?)(\)$|$)", text)
                    if text.startswith("proctor ") or (m and text.startswith("id=$(")):
                        out.append((path, n, m.group(1) if m else text, True))
                else:
                    for m in span.finditer(line):
                        out.append((path, n, m.group(1), False))
    return out


def runnable(text):
    """The arguments after `proctor`, or None for a line that is not one command (synopsis
    notation, pipes, shell)."""
    text = re.sub(r"\s+#.*$", "", text)  # a trailing comment
    if any(c in text for c in "[]|<>") or "..." in text or "…" in text or "&&" in text:
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if not words or words[0] != "proctor" or len(words) < 2:
        return None
    words = words[1:]
    # Our node, not the docs' address.
    out = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w == "--node":
            skip = True
            continue
        if w.startswith("--node="):
            continue
        out.append(w)
    return out or None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.bin, "proctor")):
        print("docs_commands: no proctor binary in " + args.bin + "; skipped")
        return SKIP
    with tempfile.TemporaryDirectory() as work:
        node = Node(args.bin, work, "docs-token")
        node.start()
        try:
            r = node.ctl("submit", "demo.noop", "--args-json", '{"steps":1}')
            check(r.returncode == 0, "submit failed: " + r.stderr)
            ended = r.stdout.strip()
            wait_until(lambda: (node.status(ended) or {}).get("state") == "SUCCESS",
                       "the sample procedure to end")
            subst = placeholders(ended)
            seen, bad, ran = set(), [], 0
            for path, n, text, whole in command_lines(args.root):
                words = runnable(text)
                if words is None:
                    continue
                words = [subst.get(w, w) for w in words]
                if words[0] in ("watch", "wait"):
                    words += ["--timeout-s", "2"]
                key = tuple(words)
                if key in seen:
                    continue
                seen.add(key)
                try:
                    r = node.ctl(*words, timeout=30)
                except Exception as e:  # a hang is not a usage error, but say so
                    bad.append(f"{os.path.relpath(path, args.root)}:{n}: `{text}`: {e}")
                    continue
                ran += 1
                said = (r.stderr or r.stdout).strip()
                # An inline mention may leave out a required argument ("`proctor retry` runs
                # it forward"): only a code block's line must run as it stands.
                if r.returncode == USAGE and (whole or "required" not in said):
                    bad.append(f"{os.path.relpath(path, args.root)}:{n}: `{text}` is refused "
                               f"as usage: {said.splitlines()[:1]}")
            print(f"docs_commands: {ran} documented command line(s) run")
            check(ran >= 20, f"only {ran} command lines found: is the extraction broken?")
            check(not bad, "documented command lines the CLI refuses:\n  " + "\n  ".join(bad))
        finally:
            node.stop()
    print("docs_commands: passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print(f"docs_commands: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
