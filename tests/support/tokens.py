"""Tokens and the command line for the security tests: ``create_token`` runs the real
`fairdeck token create` in process; ``run_cli`` runs the console script in a child process with a
clean environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.cli import main
from tests.support.env import clean_env

MakeToken = Callable[[str, str], str]


def create_token(
    data: Path, tenant: str, role: str, capsys: pytest.CaptureFixture[str], label: str = ""
) -> str:
    """`fairdeck token create` against the data dir; returns what it printed on stdout."""
    capsys.readouterr()
    assert (
        main(["token", "create", "--data", str(data), "--tenant", tenant, "--role", role, "--label", label])
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return out.strip()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
