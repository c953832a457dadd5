"""The reaper's voids go in batches, each charged to the tenant that opened the hand.

The reaper voided one ``update_hand`` at a time, one transaction (one fsync) each: about 1,200
hands a second, so five tenants' abandoned tournaments took a minute to void while every entry
waited for it. Voids now go as slices of hands per storage operation (``update_hands``), all
handed over at once, and a writer commits many per transaction, on both engines.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from fairdeck.log.logentry import VOIDED, RevealEntry, decode
from fairdeck_server import fair
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.base import Change, HandRecord, Storage, StoredHandState
from tests.support.engines import Engine, run

TENANTS = ("a", "b", "c")
HANDS = 160


def test_stale_hands_are_voided_many_per_transaction_on_every_engine(storage_engine: Engine) -> None:
    async def scenario(s: Storage) -> None:
        now = [1_000_000]
        dealer = Dealer(s, SeedVault(secrets.token_bytes(32)), clock_ms=lambda: now[0])
        for tenant in TENANTS:
            async for _ in await dealer.deal_hands(tenant, "standard", HANDS, [], False):
                pass
        now[0] += 10_000
        fresh = await dealer.open_hand("a", "standard", "")  # not stale: stays open
        stats = s.stats  # type: ignore[attr-defined]
        before = stats.batches
        voided = 0
        while handled := await dealer.void_stale(5_000):
            voided += handled
        transactions = stats.batches - before
        assert voided == len(TENANTS) * HANDS
        # One transaction per void before; now many voids share one.
        assert transactions * 8 <= voided, (transactions, voided)
        assert await s.open_hands() == 1
        record = await s.get_hand("a", fresh.hand_id)
        assert record is not None and record.state is StoredHandState.OPEN
        closed = [h for h in await s.log_entries(0, await s.log_size()) if isinstance(decode(h), RevealEntry)]
        assert len(closed) == voided and all(decode(e).outcome == VOIDED for e in closed)  # type: ignore[union-attr]

    run(storage_engine, scenario)


def test_a_void_slice_is_work_of_the_tenant_that_opened_its_hands(storage_engine: Engine) -> None:
    """Each storage operation of a void carries its hand's tenant (its turns at the writer), and
    no more than VOID_SLICE hands."""
    from fairdeck_server.dealing.voids import VOID_SLICE

    async def scenario(s: Storage) -> None:
        now = [1_000_000]
        dealer = Dealer(s, SeedVault(secrets.token_bytes(32)), clock_ms=lambda: now[0])
        for tenant in TENANTS:
            async for _ in await dealer.deal_hands(tenant, "standard", 40, [], False):
                pass
        seen: list[tuple[str, str, int]] = []
        update_hands = s.update_hands

        async def watched(
            tenant: str, hand_ids: Sequence[str], decide: Callable[[HandRecord], tuple[Change, Any]]
        ) -> list[HandRecord | DealerError]:
            seen.append((fair.current(), tenant, len(hand_ids)))
            return await update_hands(tenant, hand_ids, decide)

        s.update_hands = watched  # type: ignore[method-assign]
        now[0] += 10_000
        assert await dealer.void_stale(5_000) == 3 * 40
        assert {whose for whose, _, _ in seen} == set(TENANTS)
        assert all(whose == tenant and n <= VOID_SLICE for whose, tenant, n in seen)

    run(storage_engine, scenario)
