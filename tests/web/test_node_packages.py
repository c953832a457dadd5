"""The README's `pytest` installs client/web's packages itself: when its node_modules does not hold
what the lock file pins, `npm ci` runs once; when it does, nothing runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.web import browser


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
