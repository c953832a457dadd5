"""The page harness's server (``node harness.mjs --serve``, through tests/support/browser.run): jobs in
one browser share no state, a dead browser or a hung job costs that job alone, the server and its
browsers die with the test process that started them, and the one-shot mode (``node harness.mjs
JOB.json``, which bench/ and a person debugging a job use) still answers alike.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser
from tests.support.waits import wait_for

STORE = """<!doctype html><meta charset="utf-8"><script>
// Says (as a refused request) what an earlier page left in this origin's storage, then leaves some.
const left = localStorage.getItem("left") ?? "none";
fetch(`http://store.invalid/${left}/${document.cookie.length}`).catch(() => {});
localStorage.setItem("left", "by-an-earlier-page");
document.cookie = "left=1; max-age=3600";
</script>"""


def store_job(tmp: Path) -> dict[str, Any]:
    page = tmp / "store.html"
    page.write_text(STORE, encoding="utf-8")
    return {"control": str(page)}


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_a_job_sees_nothing_an_earlier_job_left_in_the_same_browser(engine: str, tmp_path: Path) -> None:
    browser.require_browser(engine)
    job = store_job(tmp_path)
    first = browser.run(job, tmp_path, engine=engine)
    second = browser.run(job, tmp_path, engine=engine)
    assert first["control"] == ["http://store.invalid/none/0"], first
    assert second["control"] == first["control"], "the second job saw the first one's storage"
    assert second["requests"] == [] and second["errors"] == []


def served(engine: str) -> browser.HarnessServer:
    """This process's server for ``engine`` with the default launch options."""
    return browser.SERVERS[(os.getpid(), engine, browser.executable(engine), None, None)]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            out.append(int(entry.name))
    return out


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_a_job_whose_browser_died_fails_saying_so_and_the_next_job_gets_a_new_one(
    engine: str, tmp_path: Path
) -> None:
    browser.require_browser(engine)
    job = store_job(tmp_path)
    browser.run(job, tmp_path, engine=engine)
    server = served(engine)
    launched = children(server.process.pid)
    assert launched, "the server launched no browser"
    for pid in launched:
        os.kill(pid, signal.SIGKILL)
    with pytest.raises(AssertionError, match="its browser died: the next job launches a new one"):
        browser.run(job, tmp_path, engine=engine)
    assert served(engine) is server, "the server itself lives on"
    assert browser.run(job, tmp_path, engine=engine)["control"] == ["http://store.invalid/none/0"]


def test_a_job_past_its_deadline_kills_the_server_and_the_next_job_starts_a_new_one(tmp_path: Path) -> None:
    browser.require_browser("chromium")
    job = store_job(tmp_path)  # the control page is watched for 500 ms: far past a 50 ms deadline
    browser.run(job, tmp_path)
    server = served("chromium")
    with pytest.raises(AssertionError, match=r"the harness gave no answer in 0\.05 s; it is killed"):
        browser.run(job, tmp_path, timeout=0.05)
    assert server.process.poll() is not None
    assert browser.run(job, tmp_path)["control"] == ["http://store.invalid/none/0"]
    assert served("chromium") is not server


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_the_one_shot_harness_answers_as_the_server(engine: str, tmp_path: Path) -> None:
    browser.require_browser(engine)
    job = {**store_job(tmp_path), "verify": [{"id": "empty", "bytes_b64": ""}]}
    once = browser.run_once(job, tmp_path, engine=engine)
    assert once == browser.run(job, tmp_path, engine=engine)
    assert once["verify"]["empty"]["ok"] is False and once["control"] == ["http://store.invalid/none/0"]


def test_the_plain_browser_stays_while_browsers_with_options_come_and_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process past its MAX_SERVERS closes a server launched with options (a dark Firefox, a larger
    text: a test or two use each), the least recently used first, and keeps the plain one that most
    tests share, however long ago it was used: it was closed first, and its browser launched again.
    (A server launches its browser at its first job: these, given none, launch none.)"""
    browser.require(browser.node_missing())
    monkeypatch.setattr(browser, "SERVERS", OrderedDict())
    pid, binary = os.getpid(), browser.executable("firefox")
    plain = (pid, "firefox", binary, None, None)
    options = [("light", None), ("dark", None), (None, 32), ("dark", 32)]
    dressed = [(pid, "firefox", binary, *o) for o in options]
    try:
        first = browser._server(plain)
        for key in dressed:
            browser._server(key)
        assert list(browser.SERVERS) == [plain, *dressed[1:]]
        assert browser._server(plain) is first and first.process.poll() is None
    finally:
        browser.close_servers()


SCHEME = """<!doctype html><meta charset="utf-8"><script>
// Says (as a refused request) which color scheme the page sees.
const dark = matchMedia("(prefers-color-scheme: dark)").matches;
fetch(`http://scheme.invalid/${dark ? "dark" : "light"}`).catch(() => {});
</script>"""


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_a_job_that_asks_for_the_light_scheme_runs_in_the_plain_browser(engine: str, tmp_path: Path) -> None:
    """Firefox takes its color scheme at launch only, and a job that named the light scheme (the one
    a page gets when none is named) launched a Firefox of its own: one launch more a run, for the
    page that the plain browser shows alike."""
    browser.require_browser(engine)
    page = tmp_path / "scheme.html"
    page.write_text(SCHEME, encoding="utf-8")
    # Dark in Chromium alone, which takes it for each page: in Firefox it is one more launch (the
    # dark test of test_page_access.py shows it there).
    schemes = (None, "light", "dark") if engine == "chromium" else (None, "light")
    seen = [browser.run({"control": str(page), "color_scheme": s}, tmp_path, engine=engine)["control"]
            for s in schemes]  # fmt: skip
    assert seen == [[f"http://scheme.invalid/{s or 'light'}"] for s in schemes]
    assert [k for k in browser.SERVERS if k[1] == engine and k[3] == "light"] == []
    assert len(children(served(engine).process.pid)) == 1, "the light job launched a browser of its own"


WORKER = """
import os, sys
from pathlib import Path
from tests.support import browser
engine, tmp, page, how = sys.argv[1:]
browser.run({"control": page}, Path(tmp), engine=engine)
if how == "alone" and os.fork() == 0:  # a child holding every pipe open, the harness's stdin too
    sys.stdin.read()
    os._exit(0)
print(next(iter(browser.SERVERS.values())).process.pid, flush=True)
sys.stdin.read()
"""
"""A test process (as a pytest-xdist worker is) with a harness server and its browser: it says the
server's pid, then waits for its stdin to end."""


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    return [pid, *(p for child in children(pid) for p in tree(child))]


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has: it waits to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(
    ("engine", "how"), [("firefox", "with its harness"), ("firefox", "alone"), ("chromium", "alone")]
)
def test_browsers_die_with_a_killed_test_process(engine: str, how: str, tmp_path: Path) -> None:
    """A test process killed with its harness server (its process group: SIGKILL, as a CI timeout
    kills), or alone while a child it forked holds the server's stdin open: the server and its
    browser end too. Firefox ran on for as long as the machine did, and a forked child held all."""
    browser.require_browser(engine)
    job = store_job(tmp_path)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, engine, str(tmp_path), job["control"], how],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=browser.ROOT, start_new_session=True,
    )  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    pids: list[int] = []
    try:
        line = worker.stdout.readline()
        assert line.strip().isdigit(), f"the test process said {line!r} (exit {worker.poll()})"
        pids = tree(int(line))
        assert len(pids) > 1, "the harness server launched no browser"
        if how == "alone":
            worker.kill()
        else:
            os.killpg(worker.pid, signal.SIGKILL)
        wait_for("the harness and its browser to end", lambda: not [p for p in pids if running(p)])
    finally:
        for pid in pids:  # what the old code left running, so that it does not run on
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        worker.kill()
        worker.stdin.close()  # the forked child ends with it
        worker.wait()


def test_a_shared_page_run_is_keyed_by_the_bytes_of_the_files_it_names(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    browser.require_browser("chromium")
    page = tmp_path / "asks.html"
    page.write_text('<script>fetch("http://asks.invalid/first").catch(() => {})</script>', encoding="utf-8")
    job = {"control": str(page)}
    first = browser.run_shared(job, tmp_path_factory)
    assert browser.run_shared(job, tmp_path_factory) == first
    page.write_text('<script>fetch("http://asks.invalid/second").catch(() => {})</script>', encoding="utf-8")
    second = browser.run_shared(job, tmp_path_factory)
    assert (first["control"], second["control"]) == (
        ["http://asks.invalid/first"],
        ["http://asks.invalid/second"],
    )
