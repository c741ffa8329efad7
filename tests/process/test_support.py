"""What the Python process tests share (console_browser_test.py, http_clients_test.py,
dashboard_metrics_test.py): free ports, bounded waits on conditions, failures, and a
proctord with its HTTP listener and token."""
import json
import os
import socket
import subprocess
import time

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests
LIMIT = 60  # seconds: a bound on each wait for a condition, not a pace


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond, what, limit=LIMIT, interval=0.05):
    """Polls `cond` until it returns something true, at most `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise Failure(f"timed out after {limit}s waiting for {what}")
        time.sleep(interval)


class Node:
    """One proctord in `work` with --http and a token, driven through the CLI. `extra`: more
    proctord options (e.g. ["--name", "n1"])."""

    def __init__(self, bin_dir, work, token, extra=()):
        self.bin = bin_dir
        self.work = work
        self.port = free_port()
        self.http_port = free_port()
        self.token = token
        self.token_file = os.path.join(work, "token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        self.extra = list(extra)
        self.log_path = os.path.join(work, "node.log")
        self.proc = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http_port}"

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(self.bin, "proctord"), "--data-dir", os.path.join(self.work, "data"),
             "--listen", f"127.0.0.1:{self.port}", "--workers", "4",
             "--http", f"127.0.0.1:{self.http_port}", "--http-token-file", self.token_file,
             *self.extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_until(lambda: self.proc.poll() is not None or self.ctl("list").returncode == 0,
                   "proctord to answer")
        check(self.proc.poll() is None, "proctord exited at start:\n" + self.log_tail())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def ctl(self, *args, timeout=60):
        return subprocess.run(
            [os.path.join(self.bin, "proctor"), "--node", f"127.0.0.1:{self.port}", *args],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def json(self, *args):
        r = self.ctl(*args)
        check(r.returncode == 0, f"proctor {' '.join(args)} failed: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def status(self, id_):
        r = self.ctl("status", str(id_), "--json")
        return json.loads(r.stdout) if r.returncode == 0 else None

    def log_tail(self, n=30):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"


def on_tmpfs(path):
    """Whether `path` lies on tmpfs (the longest mount point that holds it), where libraft
    cannot open its files (O_DIRECT): the Raft tests skip there."""
    best, fstype = "", ""
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, fstype = mnt, parts[2]
    return fstype == "tmpfs"
