"""The README's `pytest` installs client/web's packages itself: when its node_modules does not hold
what the lock file pins, `npm ci` runs once; when it does, nothing runs."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import pytest

from tests.support import browser


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
