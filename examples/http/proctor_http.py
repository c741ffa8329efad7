#!/usr/bin/env python3
"""A Proctor client in Python with nothing but `requests` (docs/http-api.md).

`Proctor` below is the whole client: submit, status, wait (a long-poll, asked again while
the node answers 202), tree, history, list, event, abort, release, bypass, retry, resubmit,
nodes, metrics.
Run as a program, it walks through them against a node started with --http and a token:

    proctord --data-dir /tmp/p --listen 127.0.0.1:7001 --http 127.0.0.1:8080 --http-token s3cret
    python3 examples/http/proctor_http.py --url http://127.0.0.1:8080 --token s3cret \
        --ledger-dir /tmp/ledger

It submits a demo.ledger tree (a root and two children) twice with one nonce (one tree),
sends an event to a demo.wait_event procedure suspended on it, long-polls both results,
aborts a third procedure (it rolls back), releases the ended tree and reads /metrics.
Prints one JSON line with the ids; exits 1, saying why, at the first answer not as expected.
"""
import argparse
import json
import sys
import time
import uuid

import requests


class ProctorError(Exception):
    """An answer of the node that is an error: {"error","code"} and the HTTP status."""

    def __init__(self, status, body):
        self.status = status
        self.code = body.get("code", "")
        self.field = body.get("field")
        super().__init__(f"HTTP {status} {self.code}: {body.get('error', '')}")


class Proctor:
    """`url`: one node's URL, or a replica group's, comma-separated (any one of them will do:
    a follower names its leader). A request goes to the leader: on 503 NOT_LEADER it is sent
    again to the replica the X-Proctor-Leader header names, and when no replica answers or
    none leads yet (an election) it is sent again to the next URL, for at most `failover_s`.
    Both mean the node did nothing with it, so sending it again is safe."""

    def __init__(self, url, token=None, timeout=10.0, failover_s=30.0):
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        self.url = self.urls[0]
        self.timeout = timeout  # seconds; a wait adds its own bound
        self.failover_s = failover_s
        self.http = requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"

    def _next_url(self):
        i = self.urls.index(self.url) if self.url in self.urls else -1
        self.url = self.urls[(i + 1) % len(self.urls)]

    def _call(self, method, path, body=None, params=None, timeout=None):
        deadline = time.monotonic() + self.failover_s
        while True:
            try:
                r = self.http.request(method, self.url + path, json=body, params=params,
                                      timeout=timeout or self.timeout)
            except requests.ConnectionError as e:
                # Refused: nothing reached a node (a killed leader). Anything else may have.
                if "refused" not in str(e).lower() or time.monotonic() >= deadline:
                    raise
                self._next_url()
                time.sleep(0.1)
                continue
            if r.status_code == 503 and time.monotonic() < deadline:
                leader = r.headers.get("X-Proctor-Leader")
                if leader:
                    scheme = self.url.split("://", 1)[0]
                    self.url = f"{scheme}://{leader}"
                    continue
                if r.headers.get("Content-Type", "").startswith("application/json") and \
                        r.json().get("code") == "NOT_LEADER":
                    self._next_url()  # an election: no leader named yet
                    time.sleep(0.1)
                    continue
            break
        if r.status_code >= 400:
            try:
                raise ProctorError(r.status_code, r.json())
            except ValueError:
                raise ProctorError(r.status_code, {"error": r.text})
        return r

    def submit(self, type_, args=None, nonce=None, priority=0):
        """The new procedure's id, once its submission is durable. Pass a nonce to make the
        submit safe to send again (after a lost answer): the same nonce answers the same id."""
        body = {"type": type_, "args": args or {}, "priority": priority}
        body["nonce"] = nonce or str(uuid.uuid4())
        return self._call("POST", "/api/procs", body).json()["id"]

    def status(self, id_):
        return self._call("GET", f"/api/procs/{id_}").json()

    def wait(self, id_, timeout_s=None, poll_s=30):
        """The status once the procedure ended (SUCCESS, FAILED, ROLLEDBACK); asks again
        while the node answers 202 (still running). None if `timeout_s` passes first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic()))
            wait_ms = max(1, int(left * 1000))
            r = self._call("GET", f"/api/procs/{id_}", params={"wait": f"{wait_ms}ms"},
                           timeout=self.timeout + left)
            if r.status_code == 200:
                return r.json()
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def tree(self, id_):
        return self._call("GET", f"/api/trees/{id_}").json()

    def history(self, id_):
        return self._call("GET", f"/api/procs/{id_}/history").json()

    def list(self, state=None, type_=None, all_=False):
        params = {"all": "true" if all_ else "false"}
        if state:
            params["state"] = state
        if type_:
            params["type"] = type_
        return self._call("GET", "/api/procs", params=params).json()

    def event(self, key, payload=None):
        return self._call("POST", "/api/events", {"key": key, "payload": payload}).json()

    def abort(self, id_):
        return self._call("POST", f"/api/procs/{id_}/abort").json()

    def release(self, id_):
        return self._call("POST", f"/api/procs/{id_}/release").json()

    def bypass(self, id_, force=False):
        return self._call("POST", f"/api/procs/{id_}/bypass", {"force": force}).json()

    def retry(self, id_):
        return self._call("POST", f"/api/procs/{id_}/retry").json()

    def resubmit(self, id_):
        return self._call("POST", f"/api/procs/{id_}/resubmit").json()

    def nodes(self):
        return self._call("GET", "/api/nodes").json()

    def metrics(self):
        return self._call("GET", "/metrics").text


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def until(cond, what, limit_s=30):
    deadline = time.monotonic() + limit_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {limit_s}s waiting for {what}")
        time.sleep(0.05)


def walk_through(p, ledger_dir):
    # A tree: a ledger with two children, submitted twice with one nonce.
    nonce = str(uuid.uuid4())
    args = {"ledger_dir": ledger_dir, "children": 2, "depth": 1}
    tree_id = p.submit("demo.ledger", args, nonce=nonce)
    expect(p.submit("demo.ledger", args, nonce=nonce) == tree_id,
           "a repeated nonce answered another id")

    # A procedure suspended on an event; the event wakes it with its payload.
    key = f"order-{uuid.uuid4().hex[:8]}-paid"
    waiter = p.submit("demo.wait_event", {"key": key})
    until(lambda: p.status(waiter)["state"] == "WAITING", f"procedure {waiter} to wait for {key}")
    sent = p.event(key, {"amount": 42})
    expect(sent["accepted"], f"event not accepted: {sent}")
    woke = p.wait(waiter, timeout_s=60)
    expect(woke is not None and woke["state"] == "SUCCESS", f"waiter did not succeed: {woke}")
    expect(woke["result"] == {"amount": 42}, f"waiter's result is not the payload: {woke}")

    done = p.wait(tree_id, timeout_s=60)
    expect(done is not None and done["state"] == "SUCCESS", f"tree did not succeed: {done}")
    tree = p.tree(tree_id)
    expect(len(tree["children"]) == 2 and tree["done"] == 2, f"not a tree of two: {tree}")
    expect(p.history(tree_id)["entries"], "no history")

    # A wait whose bound passes first answers None here (the node's 202), then an abort.
    stuck = p.submit("demo.wait_event", {"key": f"never-{uuid.uuid4().hex[:8]}"})
    expect(p.wait(stuck, timeout_s=0.3) is None, "a wait on a waiting procedure ended")
    expect(p.abort(stuck)["accepted"], "abort not accepted")
    rolled = p.wait(stuck, timeout_s=60)
    expect(rolled is not None and rolled["state"] == "ROLLEDBACK", f"not rolled back: {rolled}")

    # Errors are {"error","code"} with the HTTP status.
    try:
        p.submit("demo.ledger", {"ledger_dir": ledger_dir, "steps": "three"})
        raise AssertionError("a submit with bad args was accepted")
    except ProctorError as e:
        expect(e.status == 400, f"bad args answered {e}")
    try:
        p.status(987654321)
        raise AssertionError("an unknown id was found")
    except ProctorError as e:
        expect(e.status == 404 and e.code == "NOT_FOUND", f"unknown id answered {e}")

    # The ended tree is released: it is gone.
    expect(p.release(tree_id)["released"], "release not done")
    try:
        p.status(tree_id)
        raise AssertionError("a released tree is still there")
    except ProctorError as e:
        expect(e.status == 404, f"released tree answered {e}")

    nodes = p.nodes()
    expect(any(n.get("self") for n in nodes), f"no node says it is itself: {nodes}")
    text = p.metrics()
    expect("proctor_" in text and "# TYPE" in text, "metrics are not Prometheus text")
    return {"tree": tree_id, "waiter": waiter, "aborted": stuck}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--ledger-dir", required=True, help="demo.ledger's directory, on the node")
    a = ap.parse_args()
    try:
        ids = walk_through(Proctor(a.url, a.token), a.ledger_dir)
    except (AssertionError, ProctorError, requests.RequestException) as e:
        print(f"proctor_http.py: FAILED: {e}", file=sys.stderr)
        return 1
    print(json.dumps(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
