"""The README's `pytest` installs client/web's packages itself: when its node_modules does not hold
what the lock file pins, `npm ci` runs once, begun before collection where the run covers the
tests that need it; when it does, nothing runs."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.support import browser, head_start
from tests.support.waits import wait_for

ROOT = browser.ROOT


def copy_of_the_lock(tmp_path: Path) -> Path:
    (tmp_path / "node_modules").mkdir()
    shutil.copy(browser.WEB / "package-lock.json", tmp_path / "package-lock.json")
    return tmp_path


def installed(prefix: Path, lock: dict[str, object]) -> None:
    (prefix / "node_modules" / ".package-lock.json").write_text(json.dumps(lock), encoding="utf-8")


def test_a_missing_node_modules_is_stale(tmp_path: Path) -> None:
    shutil.copy(browser.WEB / "package-lock.json", tmp_path / "package-lock.json")
    assert browser.stale(tmp_path) == "node_modules is missing"


def test_node_modules_as_npm_ci_leaves_it_is_not_stale(tmp_path: Path) -> None:
    prefix = copy_of_the_lock(tmp_path)
    lock = json.loads((prefix / "package-lock.json").read_text())
    # npm records what it installed, without the root entry and without other platforms' builds.
    packages = {k: v for k, v in lock["packages"].items() if k and not v.get("optional")}
    installed(prefix, {**lock, "packages": packages})
    assert browser.stale(prefix) is None


def test_a_package_at_another_version_or_missing_is_stale(tmp_path: Path) -> None:
    prefix = copy_of_the_lock(tmp_path)
    lock = json.loads((prefix / "package-lock.json").read_text())
    packages = {k: v for k, v in lock["packages"].items() if k and not v.get("optional")}
    older = {
        **packages,
        "node_modules/playwright-core": {**packages["node_modules/playwright-core"], "version": "1.0.0"},
    }
    installed(prefix, {**lock, "packages": older})
    assert browser.stale(prefix) == (
        f"node_modules/playwright-core {packages['node_modules/playwright-core']['version']} is not installed"
    )
    del packages["node_modules/puppeteer-core"]
    installed(prefix, {**lock, "packages": packages})
    assert browser.stale(prefix) is not None and "puppeteer-core" in str(browser.stale(prefix))


def test_client_web_is_installed_from_its_lock_file_by_the_test_run() -> None:
    """On a machine with Node.js, the run itself has brought node_modules to the lock file."""
    browser.require(browser.node_missing())
    assert browser.stale(browser.WEB) is None


def stale_copy(tmp_path: Path) -> Path:
    """client/web's manifest and lock file, over a node_modules that npm ci would replace: one
    package behind the lock file, and a file of the owner's own in it."""
    tmp_path.mkdir()
    prefix = copy_of_the_lock(tmp_path)
    shutil.copy(browser.WEB / "package.json", prefix / "package.json")
    lock = json.loads((prefix / "package-lock.json").read_text())
    packages = {k: v for k, v in lock["packages"].items() if k and not v.get("optional")}
    packages["node_modules/typescript"] = {**packages["node_modules/typescript"], "version": "6.0.0"}
    installed(prefix, {**lock, "packages": packages})
    (prefix / "node_modules" / "mine.txt").write_text("kept")
    return prefix


def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, registry: str) -> None:
    """npm as on a machine without the registry: a cold cache, and no retries (npm's own default
    retries the same refusal for a minute)."""
    monkeypatch.setenv("npm_config_registry", registry)
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")


def test_offline_a_stale_node_modules_is_kept_and_the_line_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """npm ci deletes node_modules before it fetches anything: offline, the run used to leave the
    developer with none, and say only where npm's log was."""
    browser.require(browser.node_missing())
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    offline(monkeypatch, tmp_path, f"http://127.0.0.1:{port}/")
    prefix = stale_copy(tmp_path / "project")
    why = browser.npm_ci.__wrapped__(prefix)
    assert why is not None and "\n" not in why
    assert "ECONNREFUSED" in why and "registry" in why and "complete log" not in why, why
    assert (prefix / "node_modules" / "mine.txt").read_text() == "kept"
    assert browser.stale(prefix) == "node_modules/typescript 7.0.2 is not installed"


def test_a_registry_that_never_answers_costs_a_bounded_wait_not_each_test_its_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A registry behind a firewall that drops packets: npm waits 5 minutes per request, past
    pytest's timeout, and the failure (an exception) was not remembered, so every browser test
    waited again."""
    browser.require(browser.node_missing())
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # connections are accepted by the kernel, and never answered
        offline(monkeypatch, tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}/")
        monkeypatch.setattr(browser, "NPM_CI_SECONDS", 3.0)
        prefix = stale_copy(tmp_path / "project")
        started = time.monotonic()
        why = browser.npm_ci.__wrapped__(prefix)
        assert time.monotonic() - started < 60
    assert why is not None and "did not finish in 3 s" in why and "\n" not in why, why
    assert (prefix / "node_modules" / "mine.txt").read_text() == "kept"


def test_a_browser_variable_naming_no_program_is_said_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAIRDECK_CHROMIUM set to a path that is not there: the line named the variable's mistake as
    "Chromium is not installed", and its advice (apt-get install) changed nothing."""
    monkeypatch.setenv("FAIRDECK_CHROMIUM", "/nowhere/chromium")
    why = browser._missing("chromium")
    assert why is not None and "FAIRDECK_CHROMIUM=/nowhere/chromium" in why and "not installed" not in why


class Registry:
    """A registry that answers every request 404 and counts them: npm fails at once, and a test can
    tell whether npm asked again."""

    def __init__(self) -> None:
        self.asked = 0
        counting = threading.Lock()
        registry = self

        class Answer(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with counting:
                    registry.asked += 1
                self.send_error(404)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_run_begins_npm_ci_early_only_where_it_covers_the_tests_that_need_it() -> None:
    """`npm ci` ran in the first browser test, minutes into a fresh checkout's run, while that
    worker (and the others, their first tests in a browser too) waited on it."""
    node = ROOT / "examples" / "node"
    assert head_start.prefixes_for(["tests", "client/fairdeck"], ROOT) == [browser.WEB, node]
    assert head_start.prefixes_for(["."], ROOT) == [browser.WEB, node]
    assert head_start.prefixes_for(["tests/web/test_page_build.py::test_x"], ROOT) == [browser.WEB]
    assert head_start.prefixes_for(["web"], ROOT / "tests") == [browser.WEB]
    assert head_start.prefixes_for(["tests/core", "tests/log/test_merkle.py"], ROOT) == []


def test_the_runs_processes_take_the_head_starts_outcome_and_do_not_install_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    browser.require(browser.node_missing())
    monkeypatch.delenv(browser.HEAD_START, raising=False)  # put back as it was at the end
    registry = Registry()
    try:
        offline(monkeypatch, tmp_path, registry.url)
        prefix = stale_copy(tmp_path / "project")
        started = browser.head_start([prefix])
        assert started is not None
        try:
            wait_for("the head start's install to end", lambda: not started.thread.is_alive(), timeout=120)
            asked = registry.asked
            why = browser.npm_ci.__wrapped__(prefix)  # as a worker's first test that needs the packages
        finally:
            started.stop()
    finally:
        registry.close()
    assert asked > 0 and registry.asked == asked, (asked, registry.asked)
    assert why is not None and "failed" in why and "\n" not in why, why
    assert (prefix / "node_modules" / "mine.txt").read_text() == "kept"
    assert browser.HEAD_START not in os.environ


def test_an_install_under_way_when_the_run_ends_is_stopped_and_node_modules_put_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A run that ends before its head start's install (Ctrl-C, or a run with nothing that needs
    it) must not leave npm deleting node_modules behind it, nor the next run a half-made one."""
    browser.require(browser.node_missing())
    monkeypatch.delenv(browser.HEAD_START, raising=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # connections are accepted by the kernel, and never answered
        offline(monkeypatch, tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}/")
        prefix = stale_copy(tmp_path / "project")
        started = browser.head_start([prefix])
        assert started is not None
        process = wait_for("npm ci to start", lambda: started.running[:1])[0]
        begun = time.monotonic()
        started.stop()
        assert time.monotonic() - begun < 60  # not npm's own timeout, nor NPM_CI_SECONDS
    assert process.poll() is not None and not started.thread.is_alive()
    assert (prefix / "node_modules" / "mine.txt").read_text() == "kept"
    assert browser.stale(prefix) == "node_modules/typescript 7.0.2 is not installed"
