"""A machine with one of the two browsers runs that browser's page tests: a missing Chromium skips
the Chromium tests only (the dealer the live tests share needs no browser). The run is pytest's own,
in this process (``pytest.main``), so that its Firefox test takes this process's Firefox: a pytest
of its own paid a Python start-up and a Firefox launch, most of the test's cost."""

from __future__ import annotations

import pytest

from tests.support import browser


def test_firefox_tests_run_where_chromium_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    browser.require_browser("firefox")
    monkeypatch.delenv("CI_REQUIRE_BROWSER", raising=False)
    monkeypatch.setenv("FAIRDECK_CHROMIUM", "/nowhere/chromium")
    monkeypatch.setattr(browser, "SKIPPED", set())  # the inner run's reasons are not this run's
    capsys.readouterr()
    code = pytest.main(
        ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--rootdir={browser.ROOT}",
         "-c", str(browser.ROOT / "pyproject.toml"),
         "-o", "timeout=0",  # pytest-timeout's alarm is this test's: the inner run leaves it alone
         str(browser.ROOT / "tests" / "web" / "test_page_live.py"), "-k", "pinned_key"]
    )  # fmt: skip
    out = capsys.readouterr().out
    summary = out.strip().splitlines()[-1]
    assert code == 0 and "1 passed, 1 skipped" in summary, out[-3000:]
    assert "FAIRDECK_CHROMIUM=/nowhere/chromium is not a program" in out
