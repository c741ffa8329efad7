"""What the Python process tests share (console_browser_test.py, http_clients_test.py,
dashboard_metrics_test.py): free ports, bounded waits on conditions, failures."""
import socket
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
