#!/usr/bin/env python3
"""A worker of Proctor's durable task queues (docs/workers.md), with only `requests`.

Long-polls one queue and, for each task: appends "<proc> <step> <attempt> <worker>" (and
" undo" for an undo's task, whose input has "undo":true) to <ledger_dir>/<proc>.ledger
(fsynced) when the input names a ledger_dir, as demo.dispatch's tasks do; works --hold seconds, heartbeating meanwhile (at least once) when the task asks for
heartbeats; completes it with {"step":K,"worker":NAME,"attempt":N}. A refused report (409:
the lease ran out, the task ended or was cancelled) is logged and the task dropped. SIGTERM
stops the worker once its poll under way and its task are done.

    worker.py --node http://127.0.0.1:8080 --token-file /etc/proctor/token \
        --queue demo.q --worker w1 [--hold SECONDS] [--once N]

--node may list a replica group's replicas (comma-separated): requests go to the one that
leads, following a follower's 503 X-Proctor-Leader, and to the next on a lost connection.
"""
import argparse
import os
import signal
import sys
import time

import requests

stopping = False


def log(text):
    print(f"worker: {text}", file=sys.stderr, flush=True)


class Node:
    """The node's URL, or its replicas' (the one believed to lead first)."""

    def __init__(self, urls):
        self.urls = [u.rstrip("/") for u in urls.split(",") if u]
        self.i = 0

    @property
    def url(self):
        return self.urls[self.i]

    def moved(self, headers):
        """After a lost connection or a 503: the leader a follower named, else the next."""
        leader = headers.get("X-Proctor-Leader")
        if leader and f"http://{leader}" in self.urls:
            self.i = self.urls.index(f"http://{leader}")
        else:
            self.i = (self.i + 1) % len(self.urls)


def post(session, node, path, body, tries=12):
    """(status, JSON body, headers). A lost connection and a 503 are sent again (to the leader
    a follower names, else the next replica): a report is safe to repeat (the same complete
    answers as the first did)."""
    code, answer, headers = 0, {}, {}
    for i in range(tries):
        if i > 0:
            time.sleep(min(0.1 * 2 ** i, 2))
        try:
            r = session.post(node.url + path, json=body, timeout=75)
            code, answer, headers = r.status_code, (r.json() if r.content else {}), r.headers
        except (requests.RequestException, ValueError) as e:
            code, answer, headers = 0, {"error": str(e)}, {}
            node.moved({})
            continue
        if code != 503:
            break
        node.moved(headers)
    return code, answer, headers


def append_ledger(inp, attempt, worker):
    path = os.path.join(inp["ledger_dir"], f"{int(inp['proc'])}.ledger")
    with open(path, "a") as f:
        undo = " undo" if inp.get("undo") else ""  # a compensation (dispatch_undo)
        f.write(f"{int(inp['proc'])} {int(inp['step'])} {attempt} {worker}{undo}\n")
        f.flush()
        os.fsync(f.fileno())


def work(session, node, path, task, seconds):
    """Works `seconds`, heartbeating every third of heartbeat_ms (at least once) if the task
    asks for heartbeats. False when the task was cancelled or its lease is lost."""
    beat, end = task["heartbeat_ms"] / 1000, time.monotonic() + seconds
    while True:
        if beat > 0:
            details = {"attempt": task["attempt"]}  # the next attempt's poll sees them
            code, answer, _ = post(session, node, f"{path}/heartbeat", {"details": details})
            if code != 200 or answer.get("cancel_requested"):
                log(f"task {task['task_token']}: heartbeat {code} {answer}: dropped")
                return False
        left = end - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, beat / 3) if beat > 0 else left)


def run(session, node, task, args):
    token, attempt = task["task_token"], task["attempt"]
    inp = task["input"] if isinstance(task["input"], dict) else {}
    if inp.get("ledger_dir"):
        append_ledger(inp, attempt, args.worker)
    path = f"/api/tasks/{token}"
    if not work(session, node, path, task, args.hold):
        return
    result = {"step": inp.get("step"), "worker": args.worker, "attempt": attempt}
    if inp.get("undo"):
        result["undone"] = True
    code, answer, _ = post(session, node, f"{path}/complete", {"result": result})
    if code == 200:
        log(f"task {token} (proc {task['proc_id']}, attempt {attempt}): {answer['text']}")
    else:
        log(f"task {token}: complete refused ({code}): {answer.get('error')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", required=True, help="the node's --http URL")
    ap.add_argument("--token-file", required=True, help="the node's --http-token-file")
    ap.add_argument("--queue", required=True)
    ap.add_argument("--worker", required=True, help="this worker's name")
    ap.add_argument("--hold", type=float, default=0, metavar="S", help="work S seconds a task")
    ap.add_argument("--once", type=int, metavar="N", help="stop after N tasks")
    args = ap.parse_args()
    node = Node(args.node)
    with open(args.token_file) as f:
        token = f.read().strip()

    def on_term(*_):
        global stopping
        stopping = True
    signal.signal(signal.SIGTERM, on_term)

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    poll = {"queues": [args.queue], "worker": args.worker, "max": 1, "wait": "10s"}
    done = 0
    while not stopping and (args.once is None or done < args.once):
        code, answer, headers = post(session, node, "/api/tasks/poll", poll, tries=1)
        if code != 200:
            log(f"poll: {code} {answer.get('error')}")
            time.sleep(float(headers.get("Retry-After", 1)))
            continue
        for task in answer["tasks"]:
            run(session, node, task, args)
            done += 1
    log(f"stopped after {done} task(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
