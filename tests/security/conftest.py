"""Fixtures of the security tests: a dealer that requires credentials, tokens
made through the real `fairdeck token` command, and test certificates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.cli import main
from tests.support.dealers import RunningDealer
from tests.support.pki import Pki
from tests.support.tokens import MakeToken, create_token


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir made by `fairdeck init` (tokens need a database, which only init or serve makes)."""
    path = tmp_path / "data"
    assert main(["init", "--data", str(path)]) == 0
    return path


@pytest.fixture
def token_for(data: Path, capsys: pytest.CaptureFixture[str]) -> MakeToken:
    return lambda tenant, role: create_token(data, tenant, role, capsys)


@pytest.fixture
def secured(data: Path, dealer_factory: Callable[..., RunningDealer]) -> RunningDealer:
    """A dealer on loopback that still requires credentials (as off loopback)."""
    return dealer_factory(data, require_auth=True)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.make(tmp_path / "pki")
