"""The browser tests' one line at the end of a run: what is missing for them to run here."""

from __future__ import annotations

import pytest

from tests.support import browser


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker (pytest-xdist) hands its reasons to the controller, which writes the lines."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["browser_skipped"] = sorted(browser.SKIPPED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    browser.SKIPPED.update(getattr(node, "workeroutput", {}).get("browser_skipped", ()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for why in sorted(browser.SKIPPED):
        terminalreporter.write_line(f"browser tests skipped: {why}", yellow=True)
