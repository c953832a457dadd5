"""An abandoned tournament does not stall another tenant's writes.

Tenants opened thousands of hands with DealHands(close=false) and walked away. When their
lifetime passed, the reaper voided them one transaction each, and every call that logs an entry
waited for the whole round: another tenant's calls ended DEADLINE_EXCEEDED for tens of seconds
while health said SERVING. Now voids go in batches charged to their tenants, and an entry waits
only for the hands it would otherwise make overdue. Real dealer, real SQLite file, real SDK.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from tests.support.dealers import RunningDealer
from tests.support.ops import dealer_tokens

pytestmark = pytest.mark.serial  # holds time or CPU to a bar: runs alone in a parallel run

LIFETIME = 6.0
BULK = ("t0", "t1", "t2", "t3", "t4")
HANDS = 1000
DEADLINE = 1.0
"""The other tenant's deadline: far below one round of the old reaper over these hands (one
transaction per void, seconds for 5,000 on this disk)."""


def test_an_abandoned_tournament_does_not_stall_another_tenants_writes(tmp_path: Path) -> None:
    with RunningDealer(tmp_path / "d", max_hand_lifetime=LIFETIME) as running:
        server = running.server
        assert server is not None
        tokens = dealer_tokens(running, *BULK, "other")
        for tenant in BULK:
            with DealerClient(running.target, api_token=tokens[tenant]) as c:
                assert sum(1 for _ in c.deal_hands("standard", HANDS, close=False)) == HANDS
        began = time.monotonic()

        def open_bulk() -> int:
            return sum(running._run(server.storage.open_hands(t)) for t in BULK)

        failures: list[str] = []
        calls = during = 0
        with DealerClient(running.target, api_token=tokens["other"], timeout=DEADLINE, retries=0) as other:
            while time.monotonic() - began < LIFETIME + 60:
                left = open_bulk()
                try:
                    other.deal_new_hand("standard")
                except FairdeckError as e:
                    failures.append(type(e).__name__)
                calls += 1
                if 0 < left < len(BULK) * HANDS:
                    during += 1  # a call made while the wave was under way
                if left == 0:
                    break
        assert open_bulk() == 0, "the abandoned hands were not all voided"
        assert failures == [], f"{len(failures)} of {calls} calls failed during the void wave: {failures[:5]}"
        assert during > 0, "no call was made while the hands were being voided"
        assert not server.reaper.behind
