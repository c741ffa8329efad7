#!/usr/bin/env python3
"""The HTTP API of a replica group (issues 46.6 and 47.7; docs/http-api.md, replication.md).

Runs node b as three replicas, each with --http, --metrics and a token. Every replica serves
both from its start, leading or not: a follower answers /metrics itself (its role and the
group's Raft gauges) and answers the API 503 NOT_LEADER with `X-Proctor-Leader` naming the
leader's *HTTP* address. The example client a user copies (examples/http/proctor_http.py),
given one follower's URL only, submits through it, and goes on submitting after the leader
is SIGKILLed; every procedure it was answered for is there afterwards.

Exit codes: 0 passed, 1 failed, 77 skipped (python3-requests missing, or the temporary
directory is on tmpfs, where libraft cannot open its files with O_DIRECT: set TMPDIR).

    python3 tests/process/http_replicas_test.py --bin build/bin
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "http"))
from test_support import SKIP, Failure, check, free_port, on_tmpfs, wait_until  # noqa: E402

TOKEN = "http-replicas-test-4b1f"


def get(url, token=None):
    """(status, headers, body text) of a GET; urllib, not the client under test."""
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


class Replica:
    def __init__(self, bin_dir, work, name, spec, port, token_file):
        self.bin, self.name, self.port = bin_dir, name, port
        self.http_port, self.metrics_port = free_port(), free_port()
        self.args = [os.path.join(bin_dir, "proctord"), "--name", "b", "--replica", name,
                     "--replicas", spec, "--data-dir", os.path.join(work, name),
                     "--http", f"127.0.0.1:{self.http_port}", "--http-token-file", token_file,
                     "--metrics", f"127.0.0.1:{self.metrics_port}", "--workers", "2"]
        self.log_path = os.path.join(work, name + ".log")
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http_port}"

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=open(self.log_path, "ab"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def leads(self):
        r = subprocess.run([os.path.join(self.bin, "proctor"), "--node",
                            f"127.0.0.1:{self.port}", "list", "--json"],
                           capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        return r.returncode == 0

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_tail(self, n=25):
        with open(self.log_path, errors="replace") as f:
            return f"--- {self.name}\n" + "".join(f.readlines()[-n:])


def run(bin_dir, work):
    from proctor_http import Proctor  # the example (requests)
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    ports = [(free_port(), free_port()) for _ in range(3)]
    spec = ",".join(f"b{i + 1}=127.0.0.1:{p}/{r}" for i, (p, r) in enumerate(ports))
    group = [Replica(bin_dir, work, f"b{i + 1}", spec, ports[i][0], token_file)
             for i in range(3)]
    try:
        for r in group:
            r.start()
        leader = wait_until(lambda: next((r for r in group if r.leads()), None), "a leader")
        followers = [r for r in group if r is not leader]
        f = followers[0]

        # A follower serves /metrics: its own role and the group's gauges, not a refusal.
        status, _, text = get(f"http://127.0.0.1:{f.metrics_port}/metrics")
        check(status == 200, f"a follower's /metrics answered {status}: {text[:300]}")
        check("proctor_raft_term" in text, f"no Raft gauges in a follower's /metrics:\n{text}")
        status, _, text = get(f"http://127.0.0.1:{leader.metrics_port}/metrics")
        check(status == 200 and "proctor_procedures" in text and "proctor_raft_term" in text,
              f"the leader's /metrics: {status} {text[:300]}")

        # The API on a follower: 503 NOT_LEADER naming the leader's HTTP address (once the
        # group recorded it: the leader records each member's every 2 s).
        def named():
            s, h, body = get(f.url + "/api/procs?all=true", TOKEN)
            check(s == 503 and "NOT_LEADER" in body, f"a follower answered {s}: {body}")
            return h.get("X-Proctor-Leader") == f"127.0.0.1:{leader.http_port}"
        wait_until(named, "a follower to name the leader's HTTP address")

        # The example client, knowing one follower's URL only.
        client = Proctor(f.url, token=TOKEN, failover_s=60)
        ids = [client.submit("demo.wait_event", {"key": f"k{i}"}) for i in range(3)]
        check(client.url == leader.url, f"the client went to {client.url}, not the leader")
        leader.stop(signal.SIGKILL)
        # It goes on: back to the URL it knows, then to whoever leads now.
        ids += [client.submit("demo.wait_event", {"key": f"k{i}"}) for i in range(3, 6)]
        check(client.url != leader.url, "the client still talks to the killed leader")
        for id_ in ids:
            st = client.status(id_)
            check(st["state"] == "WAITING", f"procedure {id_} after the failover: {st}")
        check(len(set(ids)) == len(ids), f"an id answered twice: {ids}")
        return 0
    except Failure:
        for r in group:
            print(r.log_tail(), file=sys.stderr)
        raise
    finally:
        for r in group:
            r.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    try:
        import requests  # noqa: F401
    except ImportError:
        print("skipped: python3-requests is not installed (scripts/setup.sh installs it)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="proctor-http-replicas-") as work:
        if on_tmpfs(work):
            print(f"skipped: {work} is on tmpfs (libraft needs O_DIRECT): set TMPDIR")
            return SKIP
        try:
            return run(os.path.abspath(a.bin), work)
        except Failure as e:
            print(f"FAILED: {e}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
