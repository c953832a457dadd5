"""The examples run against the plain default dealer of the family (``dealer``, one per module)."""

from __future__ import annotations

import pytest

from fairdeck.log.note import Signer
from tests.support.dealers import RunningDealer


@pytest.fixture(scope="module")
def key(dealer: RunningDealer) -> str:
    """The log's verifier key, as `fairdeck key` prints it (the players' only trust anchor)."""
    return Signer.parse((dealer.data_dir / "log.key").read_text().strip()).verifier.to_string()
