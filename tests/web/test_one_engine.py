"""A machine with one of the two browsers runs that browser's page tests: a missing Chromium skips
the Chromium tests only (the dealer the live tests share needs no browser)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import browser


def test_firefox_tests_run_where_chromium_is_missing() -> None:
    browser.require_browser("firefox")
    env = {k: v for k, v in os.environ.items() if k != "CI_REQUIRE_BROWSER"}
    env["FAIRDECK_CHROMIUM"] = "/nowhere/chromium"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "tests/web/test_page_live.py", "-k", "pinned_key"],
        cwd=browser.ROOT, env=env, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1]
    assert "1 passed, 1 skipped" in summary, done.stdout[-3000:]
    assert "FAIRDECK_CHROMIUM=/nowhere/chromium is not a program" in done.stdout
