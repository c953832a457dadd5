"""Lint and types are part of the suite: ruff on everything we write, and
mypy --strict on the hand-written packages (the generated fairdeck.v1 is
excluded in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    result = run("ruff", "check", "client", "server", "tests", "bench", "proto", "docs", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    result = run("mypy", "client/fairdeck", "server/fairdeck_server")
    assert result.returncode == 0, result.stdout + result.stderr
