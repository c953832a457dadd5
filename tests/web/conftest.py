"""The browser tests' one line at the end of a run: what is missing for them to run here."""

from __future__ import annotations

import pytest

from tests.support import browser


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for why in sorted(browser.SKIPPED):
        terminalreporter.write_line(f"browser tests skipped: {why}", yellow=True)
