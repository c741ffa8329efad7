#!/usr/bin/env python3
"""The web console in a real browser (docs/web-console.md).

Starts a proctord with --http and a token (from a file), submits a ledger tree whose
children are held in flight by closed gates, and opens the console in headless Chromium:
the tree and the histories must show the states the CLI reports; an abort without the
token must be refused and change nothing (checked with `proctor status`); with the token
it must roll the tree back (checked with `proctor wait`). Any error in the browser's
console fails the test, except the refused abort's own 401 that Chromium logs.

Exit codes: 0 passed, 1 failed, 77 skipped (no chromium, chromedriver or selenium).

    python3 tests/process/console_browser_test.py --bin build/bin [--show] [--screenshot F.png]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import SKIP, LIMIT, Failure, check, wait_until  # noqa: E402
from test_support import Node as SupportNode  # noqa: E402


def Node(bin_dir, work):
    return SupportNode(bin_dir, work, "console-test-token-4f1c", ["--name", "console-n1"])



def make_browser(show):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    if not show:
        opts.add_argument("--headless=new")
    for a in ("--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.binary_location = find_chromium()
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")),
                            options=opts)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def console_errors(driver, allowed):
    """The browser console's errors, less those that contain every part of one of `allowed`."""
    out = []
    for entry in driver.get_log("browser"):
        if entry.get("level") != "SEVERE":
            continue
        msg = entry.get("message", "")
        if any(all(part in msg for part in parts) for parts in allowed):
            continue
        out.append(msg)
    return out


def row_ids(driver):
    """The ids of the list's rows, top to bottom (None while the table is being redrawn)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    try:
        return [int(r.get_attribute("data-id"))
                for r in driver.find_elements(By.CSS_SELECTOR, "#procs tbody tr")]
    except StaleElementReferenceException:
        return None


def overflowing(driver, selector):
    """True when the element (or the page, for "html") needs a horizontal scrollbar."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e.scrollWidth > e.clientWidth + 1;",
        selector)


OVERLAPS_JS = """
const boxes = [...document.querySelectorAll('#timeline svg text')].map((t) => t.getBoundingClientRect());
const out = [];
for (let i = 0; i < boxes.length; ++i)
  for (let j = i + 1; j < boxes.length; ++j) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      out.push([i, j]);
  }
return [boxes.length, out];
"""

IN_VIEW_JS = """
const n = document.querySelector('#tree .node.selected');
if (!n) return false;
const r = n.getBoundingClientRect(), box = document.getElementById('tree').getBoundingClientRect();
return r.top >= Math.max(0, box.top) - 1 && r.bottom <= Math.min(innerHeight, box.bottom) + 1;
"""


def check_list_and_cluster(node, driver, root, css_wait, text_wait, click):
    """The cluster and limits panels; the list newest first with its node column, paged; long
    words wrapped; a procedure picked in the list scrolled into view in its tree."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def until(cond, what):
        try:
            return WebDriverWait(driver, LIMIT).until(lambda d: cond())
        except Exception:
            raise Failure(f"the page did not show {what} within {LIMIT}s")

    # The cluster panel: this node, up, as `proctor nodes` says.
    me = [n for n in node.json("nodes", "--json") if n.get("self")]
    check(len(me) == 1, f"proctor nodes names no node as itself: {me}")
    name = me[0]["name"]
    text_wait('#nodes tbody tr[data-up="true"] td:first-child',
              lambda t: t == f"{name} (this node)", f"node {name} up in the cluster panel")

    # The limits panel: a limit an operator sets shows, with who set it (on a type the rest
    # of the test does not run).
    r = node.ctl("limits", "set", "demo.flaky", "--max-running", "7", "--rate", "30/1m")
    check(r.returncode == 0, f"proctor limits set failed: {r.stderr.strip()}")
    text_wait('#limits tbody tr[data-type="demo.flaky"]',
              lambda t: t.split()[:5] == ["demo.flaky", "7", "30", "per", "1m"]
              and "operator" in t, "demo.flaky's limits in the limits panel")

    # Newest first: three more roots, submitted one after the other, come before the first.
    # One waits for an event whose key is one long word, shown in the list without widening
    # it (and in the status line of the detail panel).
    long_key = "k" * 400
    newer = []
    for key in ("console-a", "console-b", long_key):
        r = node.ctl("submit", "demo.wait_event", "--args-json", json.dumps({"key": key}))
        check(r.returncode == 0, f"submit failed: {r.stderr}")
        newer.append(int(r.stdout.strip()))
    want = list(reversed(newer)) + [root]
    until(lambda: (row_ids(driver) or [])[:4] == want,
          f"the list newest first, {want} (rows: {row_ids(driver)})")
    ids = row_ids(driver)
    check(ids == sorted(ids, reverse=True), f"the list is not newest first: {ids}")
    # The node column names the node answering for its own procedures.
    text_wait(f'#procs tbody tr[data-id="{root}"] td.node-name', lambda t: t == name,
              f"node {name} in the root's row")
    check(not overflowing(driver, "#procs-panel"), "the list needs a horizontal scrollbar")
    click(f'#procs tbody tr[data-id="{newer[-1]}"]', "the procedure with the long key")
    text_wait("#status", lambda t: long_key in t.replace("\n", ""), "the long key in the status")
    check(not overflowing(driver, "#detail-panel"), "the detail panel needs a horizontal scrollbar")
    check(not overflowing(driver, "html"), "the page needs a horizontal scrollbar")

    # Paged: a fanout of 30 children, listed with "children too", 25 a page.
    r = node.ctl("submit", "demo.fanout", "--args-json", json.dumps({"children": 30}))
    check(r.returncode == 0, f"submit failed: {r.stderr}")
    fanout = int(r.stdout.strip())
    tree = wait_until(lambda: (lambda t: t if len(t.get("children", [])) == 30 else None)(
        node.json("tree", str(fanout), "--json")), "the fanout's 30 children")
    total = len(node.json("list", "--all", "--json"))
    driver.find_element(By.ID, "f-all").click()
    Select(driver.find_element(By.ID, "f-size")).select_by_visible_text("25")
    text_wait("#page-info", lambda t: t == f"1–25 of {total}", f"page 1–25 of {total}")
    first = until(lambda: (lambda ids: ids if ids and len(ids) == 25 else None)(row_ids(driver)),
                  "25 rows")
    check(driver.find_element(By.ID, "page-newer").get_attribute("disabled") is not None,
          "the first page offers newer procedures")
    driver.find_element(By.ID, "page-older").click()
    text_wait("#page-info", lambda t: t == f"26–{min(total, 50)} of {total}", "the second page")
    second = until(lambda: (lambda ids: ids if ids and not set(ids) & set(first) else None)(
        row_ids(driver)), "the second page's rows")
    check(len(second) == min(total, 50) - 25, f"the second page has {len(second)} rows")
    driver.find_element(By.ID, "page-newer").click()
    text_wait("#page-info", lambda t: t.startswith("1–25 "), "the first page again")

    # Picked in the list, in a narrow window (the detail panel below the list): the tree is
    # scrolled so that the procedure picked is in view.
    last = tree["children"][-1]["id"]
    driver.set_window_size(900, 700)
    click(f'#procs tbody tr[data-id="{last}"]', "the fanout's last child in the list")
    css_wait(f'#tree .node.selected[data-id="{last}"]', "the last child picked in its tree")
    until(lambda: driver.execute_script(IN_VIEW_JS), "the picked procedure scrolled into view")
    driver.set_window_size(1400, 1000)
    driver.find_element(By.ID, "f-all").click()
    Select(driver.find_element(By.ID, "f-size")).select_by_visible_text("50")
    driver.execute_script(f"location.hash = '#proc={root}'")
    text_wait("#sel-id", lambda t: t == str(root), "the root selected again")
    return newer


def check_schedules(node, css_wait, text_wait, click):
    """The schedules panel: a schedule added shows with its cron, zone and type and its next
    fire time; run by hand, its run is a link to the procedure; paused, it says so."""
    css_wait("#schedules-none:not([hidden])", "no schedules yet")
    r = node.ctl("schedule", "add", "console-nightly", "demo.noop", "--cron", "0 3 * * *")
    check(r.returncode == 0, f"proctor schedule add failed: {r.stderr.strip()}")
    row = '#schedules tbody tr[data-name="console-nightly"]'
    text_wait(row, lambda t: "0 3 * * * UTC" in t and "demo.noop" in t and "T03:00:00Z" in t,
              "the schedule with its cron and next fire time")
    r = node.ctl("schedule", "trigger", "console-nightly")
    check(r.returncode == 0, f"proctor schedule trigger failed: {r.stderr.strip()}")
    run_id = r.stdout.strip().split()[-1]
    text_wait(row, lambda t: run_id in t.split(), f"the schedule's run {run_id}")
    click(f'{row} a', "the schedule's run")
    text_wait("#sel-id", lambda t: t == run_id, "the run selected")
    r = node.ctl("schedule", "pause", "console-nightly")
    check(r.returncode == 0, f"proctor schedule pause failed: {r.stderr.strip()}")
    css_wait(f'{row}[data-paused="true"]', "the schedule paused")
    text_wait(row, lambda t: "paused" in t.split(), "'paused' instead of a next fire time")


def run(node, driver, work):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def css_wait(selector, what):
        try:
            return WebDriverWait(driver, LIMIT).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, selector))
        except Exception:
            raise Failure(f"the page did not show {what} ({selector}) within {LIMIT}s")

    def text_wait(selector, pred, what):
        # The page redraws its tables at each poll: an element found just before a redraw is
        # stale when its text is read, which is no answer yet (it was taken for a failure).
        from selenium.common.exceptions import StaleElementReferenceException
        try:
            return WebDriverWait(driver, LIMIT,
                                 ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, selector) if pred(e.text)])
        except Exception:
            raise Failure(f"the page did not show {what} ({selector}) within {LIMIT}s")

    def click(selector, what):
        # The tree is redrawn at each poll: an element found just before a redraw is stale,
        # so find it again until the click lands.
        from selenium.common.exceptions import StaleElementReferenceException

        def attempt(d):
            try:
                d.find_element(By.CSS_SELECTOR, selector).click()
                return True
            except StaleElementReferenceException:
                return False
        try:
            WebDriverWait(driver, LIMIT).until(attempt)
        except Exception:
            raise Failure(f"could not click {what} ({selector}) within {LIMIT}s")

    # A root with two children: each child commits steps 0 and 1, then waits at the closed
    # gate of step 2 (runnable, nothing journaled); the children's undos may run (their gate
    # is open), the root's waits at its closed gate (undo.1) until the test opens it.
    gate, ledger = os.path.join(work, "gate"), os.path.join(work, "ledger")
    os.makedirs(gate)
    os.makedirs(ledger)
    for name in ("step.0", "step.1", "undo.0"):
        open(os.path.join(gate, name), "w").close()
    args = json.dumps({"steps": 3, "children": 2, "depth": 1, "ledger_dir": ledger,
                       "gate_dir": gate})
    r = node.ctl("submit", "demo.ledger", "--args-json", args)
    check(r.returncode == 0, f"submit failed: {r.stderr}")
    root = int(r.stdout.strip())

    def children_held():
        tree = node.json("tree", str(root), "--json")
        kids = tree.get("children", [])
        if tree["state"] != "WAITING" or len(kids) != 2:
            return None
        for k in kids:
            steps = [e for e in node.json("history", str(k["id"]), "--json")["entries"]
                     if e["kind"] == "step"]
            if len(steps) < 2:
                return None
        return tree
    tree = wait_until(children_held, "both children to commit two steps")
    kids = [k["id"] for k in tree["children"]]

    driver.get(f"http://127.0.0.1:{node.http_port}/#proc={root}")
    check("Proctor" in driver.title, f"unexpected page title {driver.title!r}")

    # The tree: the root waiting for its children, none of them ended (0/2), each child in
    # the state the CLI reports.
    css_wait(f'#tree .node[data-id="{root}"][data-state="WAITING"]', "the root WAITING")
    css_wait(f'#tree .node[data-id="{root}"] .progress[data-done="0"][data-total="2"]',
             "the root's progress 0/2")
    for k in tree["children"]:
        css_wait(f'#tree .node[data-id="{k["id"]}"][data-state="{k["state"]}"]',
                 f"child {k['id']} {k['state']}")

    waiters = check_list_and_cluster(node, driver, root, css_wait, text_wait, click)

    # The list: the root's row, with its state; a state filter that excludes it.
    css_wait(f'#procs tbody tr[data-id="{root}"][data-state="WAITING"]', "the root in the list")
    Select(driver.find_element(By.ID, "f-state")).select_by_value("SUCCESS")
    WebDriverWait(driver, LIMIT).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, f'#procs tbody tr[data-id="{root}"]'))
    Select(driver.find_element(By.ID, "f-state")).select_by_value("")
    css_wait(f'#procs tbody tr[data-id="{root}"]', "the root back in the unfiltered list")

    # The history of a child, picked in the tree: the same entries as `proctor history`,
    # its two steps drawn on the timeline.
    click(f'#tree .node[data-id="{kids[0]}"]', "the first child in the tree")
    cli_history = node.json("history", str(kids[0]), "--json")
    want = [str(e["lsn"]) for e in cli_history["entries"]]
    css_wait(f'#history-table tbody tr[data-lsn="{want[-1]}"]', "the child's last entry")
    def history_lsns():
        # The table is redrawn at each poll: rows found before a redraw are stale.
        from selenium.common.exceptions import StaleElementReferenceException
        try:
            return [r.get_attribute("data-lsn")
                    for r in driver.find_elements(By.CSS_SELECTOR, "#history-table tbody tr")]
        except StaleElementReferenceException:
            return None
    try:
        WebDriverWait(driver, LIMIT).until(lambda d: history_lsns() == want)
    except Exception:
        raise Failure(f"history rows {history_lsns()} != CLI's {want}")
    check(len(driver.find_elements(By.CSS_SELECTOR, '#timeline g.entry[data-kind="step"] rect')) >= 2,
          "the timeline does not show the child's two steps")
    text_wait("#sel-id", lambda t: t == str(kids[0]), "the child selected")
    # Its labels (entries journaled within a few ms) do not overlap.
    count, overlaps = driver.execute_script(OVERLAPS_JS)
    check(count >= 3 and not overlaps, f"timeline labels overlap: {overlaps} of {count}")

    # Locks and task queues (none here) and the metrics charts fed by /api/metrics.
    css_wait("#locks-none:not([hidden])", "no locks")
    text_wait("#queues-panel #queues-none:not([hidden])", lambda t: t == "no task queues",
              "no task queues")
    text_wait("#v-steps", lambda t: t != "", "a steps/s value")

    # Abort without the token: refused (401), nothing changes.
    click(f'#tree .node[data-id="{root}"]', "the root in the tree")
    text_wait("#sel-id", lambda t: t == str(root), "the root selected")
    abort = driver.find_element(By.ID, "abort")
    check(abort.is_enabled(), "the abort button is disabled: " +
          driver.find_element(By.ID, "actions-why").text)
    abort.click()
    text_wait("#abort", lambda t: t.startswith("Really abort"), "the abort button armed")
    abort.click()
    css_wait('#action-result[data-status="401"]', "the abort refused with 401")
    check(node.json("status", str(root))["state"] == "WAITING",
          "an abort without the token changed the root's state")
    for k in kids:
        check(node.json("status", str(k))["state"] not in ("ROLLEDBACK", "FAILED", "SUCCESS"),
              f"an abort without the token ended child {k}")

    # With the token: accepted, and the tree rolls back.
    driver.find_element(By.ID, "token").send_keys(node.token)
    abort.click()
    text_wait("#abort", lambda t: t.startswith("Really abort"), "the abort button armed")
    abort.click()
    css_wait('#action-result[data-status="200"]', "the abort accepted")
    # Rolling back (the root's undo waits at its gate): FAILED, yet not over, so the actions
    # stay open (they were disabled as if it had ended).
    wait_until(lambda: node.json("status", str(root))["state"] == "FAILED" or None,
               "the root FAILED while its rollback waits")
    css_wait(f'#tree .node[data-id="{root}"][data-state="FAILED"]', "the root FAILED")
    text_wait("#status", lambda t: "waiting for" in t, "the root's rollback waiting")
    check(abort.is_enabled() and driver.find_element(By.ID, "bypass").is_enabled(),
          "abort/bypass disabled while the root rolls back: "
          + driver.find_element(By.ID, "actions-why").text)
    # Its history's failure says when, as its steps do.
    text_wait('#history-table tbody tr[data-kind="failed"] td:nth-child(2)',
              lambda t: t != "-", "a time on the root's failed row")
    open(os.path.join(gate, "undo.1"), "w").close()
    r = node.ctl("wait", str(root), "--timeout-s", str(LIMIT))
    check(r.returncode == 1 and json.loads(r.stdout)["state"] == "ROLLEDBACK",
          f"the aborted root did not end ROLLEDBACK: {r.stdout} {r.stderr}")
    for k in kids:
        check(node.json("status", str(k))["state"] == "ROLLEDBACK", f"child {k} not rolled back")
    css_wait(f'#tree .node[data-id="{root}"][data-state="ROLLEDBACK"]', "the root ROLLEDBACK")
    css_wait("#abort:disabled", "the abort button disabled once the root ended")
    for w in waiters:
        node.ctl("abort", str(w))

    check_schedules(node, css_wait, text_wait, click)

    errors = console_errors(driver, [(f"/api/procs/{root}/abort", "401")])
    check(not errors, "errors in the browser's console:\n  " + "\n  ".join(errors))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="directory of proctord and proctor")
    ap.add_argument("--show", action="store_true", help="a visible browser, not headless")
    ap.add_argument("--screenshot", help="save the page as this PNG at the end (pass or fail)")
    a = ap.parse_args()

    try:
        import selenium  # noqa: F401
    except ImportError:
        print(f"SKIP: python3-selenium is not installed for {sys.executable} "
              "(apt-get install python3-selenium)")
        return SKIP
    if not find_chromium() or not shutil.which("chromedriver"):
        print("SKIP: chromium or chromedriver not found (apt-get install chromium chromium-driver)")
        return SKIP

    work = tempfile.mkdtemp(prefix="proctor-console-")
    node = Node(os.path.abspath(a.bin), work)
    driver = None
    try:
        node.start()
        driver = make_browser(a.show)
        run(node, driver, work)
        print("PASS: console_browser")
        return 0
    except Failure as e:
        print(f"FAIL: {e}")
        if driver:
            try:
                print("page text:\n" + driver.find_element("tag name", "body").text[:3000])
            except Exception:
                pass
        print("node log (last lines):\n" + node.log_tail())
        return 1
    finally:
        if driver:
            if a.screenshot:
                driver.save_screenshot(a.screenshot)
            driver.quit()
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
