#!/usr/bin/env python3
"""The HTTP API's example clients against a live node (docs/http-api.md, examples/http/).

Starts a proctord with --http and a token, runs one of the examples a user copies
(examples/http/proctor_http.py: Python with `requests`; examples/http/proctor_http.sh: curl
and jq) against it, and checks what it did through the binary protocol (`proctor status`):
the waiter it woke ended SUCCESS with the event's payload, the procedure it aborted rolled
back, the tree it released is gone. Also checks that a change without the token is refused
and that an oversized body is a 413.

Exit codes: 0 passed, 1 failed, 77 skipped (requests, or curl and jq, missing).

    python3 tests/process/http_clients_test.py --bin build/bin --client python|curl
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "http")
sys.path.insert(0, HERE)
from test_support import SKIP, Failure, check, wait_until  # noqa: E402
from test_support import Node as SupportNode  # noqa: E402


def Node(bin_dir, work):
    return SupportNode(bin_dir, work, "http-clients-test-7d2e", ["--max-args-bytes", "4096"])



def post(url, body, token=None):
    """(HTTP status, JSON body) of a POST, with urllib: not the client under test."""
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def client_command(client, node, ledger_dir):
    if client == "python":
        try:
            import requests  # noqa: F401
        except ImportError:
            return None, "python3-requests is not installed (scripts/setup.sh installs it)"
        return [sys.executable, os.path.join(EXAMPLES, "proctor_http.py"), "--url", node.url,
                "--token", node.token, "--ledger-dir", ledger_dir], None
    missing = [t for t in ("curl", "jq") if shutil.which(t) is None]
    if missing:
        return None, f"{' and '.join(missing)} not installed (scripts/setup.sh installs them)"
    return ["bash", os.path.join(EXAMPLES, "proctor_http.sh"), node.url, node.token,
            ledger_dir], None


def run(args):
    work = tempfile.mkdtemp(prefix="proctor-http-clients-")
    node = Node(args.bin, work)
    ledger_dir = os.path.join(work, "ledger")
    os.makedirs(ledger_dir)
    cmd, why = client_command(args.client, node, ledger_dir)
    if cmd is None:
        print(f"SKIPPED: {why}")
        return SKIP
    try:
        node.start()
        # Changes need the token, and nothing is done without it.
        status, body = post(node.url + "/api/procs", b'{"type":"demo.noop"}')
        check(status == 401 and body.get("code") == "UNAUTHORIZED",
              f"a submit without the token answered {status} {body}")
        check(json.loads(node.ctl("list", "--json").stdout) == [],
              "a refused submit left a procedure")
        # A body past the node's bound (twice --max-args-bytes plus 64 KiB) is a 413.
        big = json.dumps({"type": "demo.noop", "args": {"x": "a" * 200_000}}).encode()
        status, body = post(node.url + "/api/procs", big, node.token)
        check(status == 413, f"an oversized body answered {status} {body}")
        # Args within the body's bound but past --max-args-bytes: a 413 naming them.
        args_big = json.dumps({"type": "demo.noop", "args": {"x": "a" * 5000}}).encode()
        status, body = post(node.url + "/api/procs", args_big, node.token)
        check(status == 413 and body.get("field") == "args",
              f"args past --max-args-bytes answered {status} {body}")

        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           stdin=subprocess.DEVNULL)
        check(r.returncode == 0, f"{args.client} client failed ({r.returncode}):\n"
              f"{r.stdout}{r.stderr}\nnode log:\n{node.log_tail()}")
        ids = json.loads(r.stdout.strip().splitlines()[-1])
        # What the client did, as the binary protocol sees it.
        waiter = node.status(ids["waiter"])
        check(waiter and waiter["state"] == "SUCCESS" and waiter["result"] == {"amount": 42},
              f"the woken waiter is {waiter}")
        aborted = node.status(ids["aborted"])
        check(aborted and aborted["state"] == "ROLLEDBACK", f"the aborted one is {aborted}")
        check(node.status(ids["tree"]) is None, "the released tree is still there")
        print(f"http client ({args.client}): passed, ids {ids}")
        return 0
    except Failure as e:
        print(f"FAILED: {e}\nnode log:\n{node.log_tail()}", file=sys.stderr)
        return 1
    finally:
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the directory of proctord and proctor")
    ap.add_argument("--client", choices=("python", "curl"), required=True)
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
