#!/usr/bin/env python3
"""Task queues driven by real worker processes over HTTP (docs/workers.md,
examples/python-worker/).

Starts a proctord with --http and a token and runs the example worker
(examples/python-worker/worker.py) against it:

- a worker SIGKILLed mid-task: its lease runs out (no heartbeat), the next attempt runs in
  another worker, and exactly that attempt's result is journaled;
- a worker that completes after its lease ran out is refused (409) and its result not used;
- a queue's limits (`proctor limits set queue:NAME`) show in `proctor queues` and GET /api/queues;
- an abort mid-task: the worker's heartbeat answers cancel_requested, and the undo of the
  task (demo.dispatch's undo_on_queue) runs in a worker before the tree is ROLLEDBACK;
- the node SIGKILLed again and again while 8 workers run 1,000 tasks and 200 undos (250
  procedures of 4 steps, every fifth failing after its last step, its undos dispatched to the
  same queue): every procedure ends SUCCESS with each step's result in its place, or
  ROLLEDBACK with each step undone newest first, and all of that work is in the ledger the
  workers write.

With --replicas, the node is a replica group of three (docs/replication.md): the workers
are given every replica's URL, and the leader is SIGKILLed while they run 60 procedures of 2
steps; the new leader carries every queued and leased task on.

Exit codes: 0 passed, 1 failed, 77 skipped (python3-requests missing; with --replicas, also
a temporary directory on tmpfs, where libraft cannot open its files: set TMPDIR).

    python3 tests/process/workers_test.py --bin build/bin [--replicas]
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "..", "examples", "python-worker", "worker.py")
sys.path.insert(0, HERE)
from test_support import SKIP, Failure, check, on_tmpfs, wait_until  # noqa: E402
from test_support import Node  # noqa: E402

TOKEN = "workers-test-5c1f"


def call(node, method, path, body=None):
    """(HTTP status, JSON body), with urllib: not the worker under test."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(node.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=70) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def submit(node, args):
    r = node.ctl("submit", "demo.dispatch", "--args-json", json.dumps(args))
    check(r.returncode == 0, f"submit failed: {r.stderr}")
    return int(r.stdout.strip())


def ended(node, id_):
    """Its status once it has ended: SUCCESS, ROLLEDBACK, or FAILED for good. A root is FAILED
    while its tree rolls back too ("rolling back: ...", "rollback (...)"), and that is no end:
    taking it for one let the SIGKILL run look at a tree half undone."""
    s = node.status(id_)
    if not s or s["state"] not in ("SUCCESS", "FAILED", "ROLLEDBACK"):
        return None
    rolling_back = s.get("waiting_for", "").startswith(("rolling back", "rollback"))
    return None if s["state"] == "FAILED" and rolling_back else s


def ledger(ledger_dir, id_):
    try:
        with open(os.path.join(ledger_dir, f"{id_}.ledger")) as f:
            return [line.split() for line in f.read().splitlines() if line]
    except OSError:
        return []


class Workers:
    def __init__(self, node, work):
        self.node, self.work, self.procs = node, work, []

    def start(self, queue, name, *extra):
        log = open(os.path.join(self.work, f"worker-{name}.log"), "ab")
        p = subprocess.Popen([sys.executable, WORKER, "--node", self.node.url, "--token-file",
                              self.node.token_file, "--queue", queue, "--worker", name, *extra],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def worker_killed_mid_task(node, workers, ledger_dir):
    id_ = submit(node, {"queue": "w.kill", "ledger_dir": ledger_dir, "heartbeat_ms": 800,
                        "start_to_close_ms": 60000, "max_attempts": 3})
    a = workers.start("w.kill", "A", "--hold", "60")
    wait_until(lambda: ledger(ledger_dir, id_), "worker A to begin the task")
    a.kill()  # SIGKILL mid-task: no complete, no more heartbeats
    workers.start("w.kill", "B")
    s = wait_until(lambda: ended(node, id_), "the procedure to end")
    check(s["state"] == "SUCCESS", f"after a worker's SIGKILL the procedure is {s}")
    check(s["result"] == {"results": [{"step": 0, "worker": "B", "attempt": 2}]},
          f"the result is not attempt 2's of worker B: {s['result']}")
    lines = ledger(ledger_dir, id_)
    check([ln[1:] for ln in lines] == [["0", "1", "A"], ["0", "2", "B"]],
          f"the ledger is not A's attempt 1 then B's attempt 2: {lines}")


def late_complete_refused(node):
    id_ = submit(node, {"queue": "w.late", "start_to_close_ms": 400, "max_attempts": 2})
    status, body = call(node, "POST", "/api/tasks/poll",
                        {"queues": ["w.late"], "worker": "late", "wait": "10s"})
    check(status == 200 and len(body["tasks"]) == 1, f"poll answered {status} {body}")
    first = body["tasks"][0]
    status, body = call(node, "POST", "/api/tasks/poll",
                        {"queues": ["w.late"], "worker": "fresh", "wait": "10s"})
    check(status == 200 and len(body["tasks"]) == 1 and body["tasks"][0]["attempt"] == 2,
          f"attempt 2 was not handed out once attempt 1's lease ran out: {status} {body}")
    second = body["tasks"][0]
    status, body = call(node, "POST", f"/api/tasks/{first['task_token']}/complete",
                        {"result": {"from": "late"}})
    check(status == 409 and body.get("code") == "REFUSED",
          f"a complete after the lease ran out answered {status} {body}")
    status, body = call(node, "POST", f"/api/tasks/{second['task_token']}/complete",
                        {"result": {"from": "fresh"}})
    check(status == 200, f"attempt 2's complete answered {status} {body}")
    s = wait_until(lambda: ended(node, id_), "the procedure to end")
    check(s["result"] == {"results": [{"from": "fresh"}]}, f"the late result was used: {s}")


def queue_limits_shown(node):
    """A queue's limits, set through `proctor limits`, in `proctor queues` (text and --json)
    and GET /api/queues."""
    r = node.ctl("limits", "set", "queue:w.limited", "--max-running", "2", "--rate", "5/1s")
    check(r.returncode == 0, f"limits set failed: {r.stderr}")
    want = {"max_leased": 2, "rate": 5, "per_ms": 1000}
    qs = {q["name"]: q for q in node.json("queues", "--json")["queues"]}
    check(qs.get("w.limited", {}).get("limits") == want,
          f"proctor queues --json does not show the limits: {qs}")
    check("limits" not in qs.get("w.late", {"limits": None}),
          f"a queue without limits shows some: {qs.get('w.late')}")
    status, body = call(node, "GET", "/api/queues")
    got = {q["name"]: q for q in body.get("queues", [])}
    check(status == 200 and got.get("w.limited", {}).get("limits") == want,
          f"GET /api/queues does not show the limits: {status} {body}")
    text = node.ctl("queues").stdout
    check("at most 2 leased, at most 5 per 1s" in text,
          f"proctor queues does not show the limits:\n{text}")
    r = node.ctl("limits", "clear", "queue:w.limited")
    check(r.returncode == 0, f"limits clear failed: {r.stderr}")


def abort_cancels(node, workers, ledger_dir):
    id_ = submit(node, {"queue": "w.abort", "heartbeat_ms": 5000, "undo_on_queue": True,
                        "ledger_dir": ledger_dir})
    status, body = call(node, "POST", "/api/tasks/poll",
                        {"queues": ["w.abort"], "worker": "x", "wait": "10s"})
    check(status == 200 and len(body["tasks"]) == 1, f"poll answered {status} {body}")
    token = body["tasks"][0]["task_token"]
    r = node.ctl("abort", str(id_))
    check(r.returncode == 0, f"abort failed: {r.stderr}")
    status, body = call(node, "POST", f"/api/tasks/{token}/heartbeat", {"details": {"at": 1}})
    check(status == 200 and body.get("cancel_requested") is True,
          f"a heartbeat after the abort answered {status} {body}")
    # The rollback hands the task's undo to the queue (dispatch_undo) and waits for it: once
    # it got there (the abort's answer comes before the rollback's first undo is journaled).
    def waits_for_undo():
        s = node.status(id_) or {}
        return s.get("state") == "FAILED" and "task on queue w.abort" in s.get("waiting_for", "")
    wait_until(waits_for_undo, "the rollback to wait for the undo's task",
               limit=30)
    workers.start("w.abort", "U", "--once", "1")
    # (FAILED while it rolls back: only ROLLEDBACK ends it here)
    s = wait_until(lambda: (node.status(id_) or {}).get("state") == "ROLLEDBACK"
                   and node.status(id_), "the aborted procedure to roll back")
    lines = ledger(ledger_dir, id_)
    check([ln[1:] for ln in lines] == [["0", "1", "U", "undo"]],
          f"the ledger is not worker U's undo of step 0: {lines}")


def node_killed_while_workers_run(node, workers, ledger_dir, rng):
    # Every fifth procedure fails after its last task, and its undos are tasks too: it rolls
    # back through the same workers and kills.
    args = {"queue": "w.chaos", "steps": 4, "ledger_dir": ledger_dir,
            "start_to_close_ms": 3000, "max_attempts": 10}
    ids = [submit(node, dict(args, **({"undo_on_queue": True, "fail_at_end": True}
                                      if n % 5 == 4 else {})))
           for n in range(250)]
    undone = set(ids[4::5])
    for i in range(8):
        workers.start("w.chaos", f"C{i}", "--hold", "0.02")
    for _ in range(4):
        time.sleep(rng.uniform(0.3, 2.0))
        node.proc.kill()  # SIGKILL: queued, leased and completing tasks alike
        node.proc.wait()
        node.start()
    wait_until(lambda: all(ended(node, i) for i in ids), "every procedure to end", limit=180)
    for i in ids:
        s = node.status(i)
        lines = ledger(ledger_dir, i)
        done = {int(ln[1]) for ln in lines if len(ln) == 4}
        check(done == {0, 1, 2, 3}, f"procedure {i}'s ledger lacks a step: {lines}")
        undos = [int(ln[1]) for ln in lines if len(ln) == 5 and ln[4] == "undo"]
        if i in undone:
            check(s["state"] == "ROLLEDBACK", f"procedure {i} ended {s}")
            # One undo at a time, newest first: each undo's first run comes after the
            # next step's; a worker killed mid-undo or a lost lease runs one again later.
            first = list(dict.fromkeys(undos))
            check(first == [3, 2, 1, 0], f"procedure {i}'s undos are not 3, 2, 1, 0: {lines}")
            continue
        check(s["state"] == "SUCCESS", f"procedure {i} ended {s}")
        steps = [r["step"] for r in s["result"]["results"]]
        check(steps == [0, 1, 2, 3], f"procedure {i}'s results are out of place: {s['result']}")
        check(not undos, f"procedure {i} succeeded, yet a worker undid a step: {lines}")


class Group:
    """Node b as three replicas, with --http and the token; `url` lists every replica's."""

    def __init__(self, bin_dir, work):
        from http_replicas_test import Replica  # (its module runs nothing on import)
        from test_support import free_port
        self.token_file = os.path.join(work, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        ports = [(free_port(), free_port()) for _ in range(3)]
        spec = ",".join(f"b{i + 1}=127.0.0.1:{p}/{r}" for i, (p, r) in enumerate(ports))
        self.replicas = [Replica(bin_dir, work, f"b{i + 1}", spec, ports[i][0], self.token_file)
                         for i in range(3)]
        self.bin = bin_dir

    @property
    def url(self):
        return ",".join(r.url for r in self.replicas)

    def leader(self):
        return wait_until(lambda: next((r for r in self.replicas
                                        if r.proc.poll() is None and r.leads()), None),
                          "a leader")

    def ctl(self, *args):
        return subprocess.run([os.path.join(self.bin, "proctor"), "--node",
                               f"127.0.0.1:{self.leader().port}", *args],
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def status(self, id_):
        r = self.ctl("status", str(id_), "--json")
        return json.loads(r.stdout) if r.returncode == 0 else None

    def log_tail(self):
        return "".join(r.log_tail() for r in self.replicas)


def leader_killed_while_workers_poll(group, workers, ledger_dir):
    for r in group.replicas:
        r.start()
    group.leader()
    ids = []
    for _ in range(60):
        r = group.ctl("submit", "demo.dispatch", "--args-json",
                      json.dumps({"queue": "w.group", "steps": 2, "ledger_dir": ledger_dir,
                                  "start_to_close_ms": 5000, "max_attempts": 10}))
        check(r.returncode == 0, f"submit failed: {r.stderr}")
        ids.append(int(r.stdout.strip()))
    for i in range(4):
        workers.start("w.group", f"G{i}")
    wait_until(lambda: sum(len(ledger(ledger_dir, i)) for i in ids) >= 20,
               "the workers to run some tasks")
    group.leader().stop(signal.SIGKILL)
    wait_until(lambda: all(ended(group, i) for i in ids), "every procedure to end", limit=180)
    for i in ids:
        s = group.status(i)
        check(s["state"] == "SUCCESS", f"procedure {i} ended {s}")
        steps = [r["step"] for r in s["result"]["results"]]
        check(steps == [0, 1], f"procedure {i}'s results are out of place: {s['result']}")
        done = {int(ln[1]) for ln in ledger(ledger_dir, i)}
        check(done == {0, 1}, f"procedure {i}'s ledger lacks a step: {ledger(ledger_dir, i)}")


def run_replicas(args):
    work = tempfile.mkdtemp(prefix="proctor-workers-group-")
    if on_tmpfs(work):
        shutil.rmtree(work, ignore_errors=True)
        print(f"SKIPPED: {work} is on tmpfs (libraft needs O_DIRECT): set TMPDIR")
        return SKIP
    group = Group(os.path.abspath(args.bin), work)
    workers = Workers(group, work)
    ledger_dir = os.path.join(work, "ledger")
    os.makedirs(ledger_dir)
    try:
        leader_killed_while_workers_poll(group, workers, ledger_dir)
        print("workers (replica group): passed")
        return 0
    except Failure as e:
        print(f"FAILED: {e}\n{group.log_tail()}", file=sys.stderr)
        return 1
    finally:
        workers.stop()
        for r in group.replicas:
            r.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(args):
    try:
        import requests  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-requests is not installed (scripts/setup.sh installs it)")
        return SKIP
    if args.replicas:
        return run_replicas(args)
    work = tempfile.mkdtemp(prefix="proctor-workers-")
    node = Node(args.bin, work, TOKEN)
    workers = Workers(node, work)
    ledger_dir = os.path.join(work, "ledger")
    os.makedirs(ledger_dir)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    try:
        node.start()
        worker_killed_mid_task(node, workers, ledger_dir)
        late_complete_refused(node)
        queue_limits_shown(node)
        abort_cancels(node, workers, ledger_dir)
        node_killed_while_workers_run(node, workers, ledger_dir, rng)
        print(f"workers: passed (seed {seed})")
        return 0
    except Failure as e:
        logs = ""
        for name in sorted(os.listdir(work)):
            if name.startswith("worker-"):
                with open(os.path.join(work, name), errors="replace") as f:
                    logs += f"--- {name}\n" + "".join(f.readlines()[-15:])
        print(f"FAILED (seed {seed}): {e}\nnode log:\n{node.log_tail()}\n{logs}", file=sys.stderr)
        return 1
    finally:
        workers.stop()
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the directory of proctord and proctor")
    ap.add_argument("--seed", type=int, help="the seed of the node's kill times")
    ap.add_argument("--replicas", action="store_true", help="run the node as a replica group")
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
