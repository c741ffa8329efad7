#!/usr/bin/env python3
"""Every metric the Grafana dashboard (examples/grafana/proctor-dashboard.json) queries exists
on a live node, with the labels its queries group by.

Starts a proctord named a with a peer b that is not running (so the per-peer metrics have a
sample), runs a procedure (so the per-type ones have one), and a node c run as a replica group
of one (so the Raft panels' metrics have a sample), scrapes both /metrics and checks each
metric name in each panel's queries against them (a histogram's _bucket/_sum/_count against
its family), and each `by (...)` label other than le and instance against its samples.

Exit codes: 0 passed, 1 failed, 77 skipped (the temporary directory is on tmpfs, where libraft
cannot open its files with O_DIRECT: set TMPDIR).

    python3 tests/process/dashboard_metrics_test.py --bin build/bin
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "..", "..", "examples", "grafana", "proctor-dashboard.json")
sys.path.insert(0, HERE)
from test_support import LIMIT, SKIP, free_port, on_tmpfs  # noqa: E402


def queries(dashboard):
    """(panel title, expr) of every target of every panel."""
    for p in dashboard["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t["expr"]


def families(text):
    """{name: [sample lines]} of the exposition's families (# TYPE lines name them)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            out.setdefault(line.split()[2], [])
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            out.setdefault(name if name in out else base, []).append(line)
    return out


def problems(dashboard, text):
    fams = families(text)
    found = []
    for title, expr in queries(dashboard):
        labels = set()
        for group in re.findall(r"by \(([^)]*)\)", expr):
            labels |= {l.strip() for l in group.split(",")} - {"le", "instance"}
        for name in set(re.findall(r"\b(?:proctor|process)_[a-z0-9_]+", expr)):
            fam = name if name in fams else re.sub(r"_(bucket|sum|count)$", "", name)
            if fam not in fams:
                found.append(f"panel '{title}': {name} is not exposed")
                continue
            for label in labels:
                if not any(f'{label}="' in s for s in fams[fam]):
                    found.append(f"panel '{title}': {fam} has no sample with label {label}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the directory of proctord and proctor")
    args = ap.parse_args()
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    work = tempfile.mkdtemp(prefix="proctor-dashboard-")
    if on_tmpfs(work):
        print(f"SKIPPED: {work} is on tmpfs (libraft needs O_DIRECT): set TMPDIR")
        shutil.rmtree(work, ignore_errors=True)
        return SKIP
    port, metrics_port = free_port(), free_port()
    log = open(os.path.join(work, "node.log"), "ab")
    node = subprocess.Popen(
        [os.path.join(args.bin, "proctord"), "--data-dir", os.path.join(work, "data"),
         "--listen", f"127.0.0.1:{port}", "--name", "a", "--peers", f"b=127.0.0.1:{free_port()}",
         "--metrics", f"127.0.0.1:{metrics_port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    replica_metrics = free_port()
    replica_log = open(os.path.join(work, "replica.log"), "ab")
    replica = subprocess.Popen(
        [os.path.join(args.bin, "proctord"), "--data-dir", os.path.join(work, "replica"),
         "--name", "c", "--replica", "c1", "--replicas",
         f"c1=127.0.0.1:{free_port()}/{free_port()}", "--metrics", f"127.0.0.1:{replica_metrics}"],
        stdout=replica_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def ctl(*a):
        return subprocess.run([os.path.join(args.bin, "proctor"), "--node", f"127.0.0.1:{port}",
                               *a], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def scrape():
        texts = []
        for p in (metrics_port, replica_metrics):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=10) as r:
                    texts.append(r.read().decode())
            except OSError:
                return None
        return "\n".join(texts)

    try:
        deadline = time.monotonic() + LIMIT
        while ctl("list", "--local").returncode != 0:
            if node.poll() is not None or time.monotonic() > deadline:
                print("FAILED: proctord did not come up:\n" + open(log.name).read())
                return 1
            time.sleep(0.05)
        ledger = os.path.join(work, "ledger")
        os.makedirs(ledger)
        r = ctl("submit", "demo.ledger", "--args-json",
                json.dumps({"ledger_dir": ledger, "steps": 2, "children": 1, "depth": 1}))
        if r.returncode != 0 or ctl("wait", r.stdout.strip(), "--timeout-s", "30").returncode != 0:
            print(f"FAILED: the procedure did not run: {r.stdout}{r.stderr}")
            return 1
        # The journal's and the peers' samples come with the first write and heartbeat.
        found = None
        while time.monotonic() < deadline:
            text = scrape()
            found = problems(dashboard, text) if text else ["a /metrics did not answer"]
            if not found:
                break
            time.sleep(0.2)
        if found:
            print("FAILED: the dashboard queries what the nodes do not expose:\n  "
                  + "\n  ".join(found) + "\nreplica c's log:\n" + open(replica_log.name).read())
            return 1
        n = sum(1 for _ in queries(dashboard))
        print(f"dashboard: the {n} queries of {len(dashboard['panels'])} panels find their metrics")
        return 0
    finally:
        for proc in (node, replica):
            proc.terminate()
        for proc in (node, replica):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
