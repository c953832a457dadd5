"""``lab collect --target`` against a dealer that requires tokens: what the kit writes and what it
refuses. A small real dealer in this process (RunningDealer, ``require_auth``), tokens made with
``fairdeck token create``; every collection is a few hundred hands."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairdeck.cli import main
from fairdeck.log.note import Signer
from tests.support.dealers import RunningDealer


@dataclass(frozen=True)
class AuthDealer:
    target: str
    key: str
    dealer_token: str
    auditor_token: str
    data: Path

    def log_size(self) -> int:
        from fairdeck.client import AuditClient

        with AuditClient(self.target, verifier=self.key, api_token=self.auditor_token) as log:
            return log.checkpoint().size


def _cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def dealer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthDealer]:
    data = tmp_path_factory.mktemp("lab-auth") / "data"
    _cli("init", "--data", str(data))
    tokens = {
        role: _cli("token", "create", "--data", str(data), "--tenant", "lab", "--role", role).split()[-1]
        for role in ("dealer", "auditor")
    }
    running = RunningDealer(data, rate_limit=0, require_auth=True)
    try:
        target = running.start()
        yield AuthDealer(target, _cli("key", "--data", str(data)), tokens["dealer"], tokens["auditor"], data)
    finally:
        running.close()


def _collect(out: Path, dealer: AuthDealer, *extra: str) -> int:
    argv = ["lab", "collect", "--out", str(out), "--target", dealer.target, "--raw-bytes", "6000"]
    return main([*argv, "--batch", "40", "--no-progress", *extra])


def test_the_token_never_reaches_a_file_of_the_collection(
    dealer: AuthDealer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest records the command, which a lab receives: the token's secret is not in it,
    however the option was spelled (argparse takes ``--token=X`` and abbreviations)."""
    secret = dealer.dealer_token.rsplit("_", 1)[-1]
    for k, spelling in enumerate(
        (["--token", dealer.dealer_token], [f"--token={dealer.dealer_token}"], ["--tok", dealer.dealer_token])
    ):
        out = tmp_path / f"kit{k}"
        assert _collect(out, dealer, "--key", dealer.key, *spelling) == 0
        for path in out.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
        command = json.loads((out / "manifest.json").read_text())["command"]
        assert "--key" in command and any("redacted" in part for part in command)
    assert secret not in capsys.readouterr().out
