"""The examples run against a real dealer on 127.0.0.1:0, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fairdeck.log.note import Signer
from tests.support.dealers import RunningDealer


@pytest.fixture(scope="module")
def dealer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDealer]:
    running = RunningDealer(tmp_path_factory.mktemp("examples") / "data")
    running.start()
    yield running
    running.close()


@pytest.fixture(scope="module")
def key(dealer: RunningDealer) -> str:
    """The log's verifier key, as `fairdeck key` prints it (the players' only trust anchor)."""
    return Signer.parse((dealer.data_dir / "log.key").read_text().strip()).verifier.to_string()
