"""A replica that lost its co-dealt record's claim (dealing/codeal_claim.py: another took it over)
must not end the record's pooled decks: the holder does. The reaper's pass is refused before it
retires one. The dealer's co-dealt side and a co-dealer in process, on real SQLite files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fairdeck_server.dealing.codeal_voids import CodealReaper
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import in_process, pooled


def test_a_replica_that_lost_its_claim_retires_no_pooled_deck(tmp_path: Path) -> None:
    now = [1_700_000_000_000]
    _codealer, dealer, storage = in_process(tmp_path, now)

    async def scene() -> None:
        await storage.start()
        await dealer.make_hand("", "short", pool_tenant="t")
        now[0] += 3_600_000
        dealer.not_held = "co-dealt hands codeal.db: record R is now held by the replica at h:/d"
        with pytest.raises(DealerError):
            await CodealReaper(dealer, 4, lambda: now[0]).round()
        await dealer.aclose()
        await storage.close()

    asyncio.run(scene())
    assert len(pooled(tmp_path)) == 1
