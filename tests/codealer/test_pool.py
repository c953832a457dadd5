"""The co-dealt deck pool: decks made ahead, taken once (also across a restart), refilled round
robin across tenants. The dealer's side runs in process against a real in-process co-dealer
(``CoDealer`` over its own SQLite ledger), so the crypto and both stores are real."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fairdeck_server.dealing.codeal_dealing import DeckPool
from tests.support.codeal_pool import close, fill, logged_setups, make_dealer, pooled


def test_pooled_decks_are_taken_once_even_by_concurrent_opens_and_after_a_restart(tmp_path: Path) -> None:
    async def run() -> tuple[list[str], list[str], list[str]]:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("t1", "short")], 4)
        ready = pooled(tmp_path)
        assert logged_setups(tmp_path) == []  # a deck in the pool is no hand yet
        taken = await asyncio.gather(*(dealer.open_hand("t1", "short") for _ in range(3)))
        await close(dealer)
        again = make_dealer(tmp_path)  # a restart: the same files, a pool again (not refilling here)
        again.pool = DeckPool(again, 4)
        later = [await again.open_hand("t1", "short") for _ in range(2)]
        await close(again)
        return ready, [r.hand_id for r in taken], [r.hand_id for r in later]

    ready, taken, later = asyncio.run(run())
    # Each hand's setup is logged once, when its deck is taken (or made) for it; the deck left in
    # the pool is not in the log.
    assert sorted(logged_setups(tmp_path)) == sorted(taken + later)
    assert len(ready) == 4
    assert sorted(taken) == sorted(set(taken)) and set(taken) <= set(ready)
    assert later[0] in set(ready) - set(taken)  # the fourth pooled deck, after the restart
    assert later[1] not in ready + taken  # the pool was empty: made on demand
    assert len(set(taken + later)) == 5


def test_refills_take_turns_across_tenants(tmp_path: Path) -> None:
    async def run() -> list[tuple[str, str]]:
        dealer = make_dealer(tmp_path)
        pool = DeckPool(dealer, 2)
        for tenant in ("big", "small", "third"):
            pool.wanted(tenant, "short")
        order = []
        while (pair := await pool._next_short()) is not None:
            order.append(pair)
            await dealer.make_hand("", pair[1], pool_tenant=pair[0])
        await close(dealer)
        return order

    order = asyncio.run(run())
    assert [t for t, _ in order] == ["big", "small", "third", "big", "small", "third"]


def test_a_tenant_never_takes_another_tenants_pooled_deck(tmp_path: Path) -> None:
    async def run() -> tuple[list[str], str]:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("a", "short")], 2)
        ready = pooled(tmp_path)
        other = await dealer.open_hand("b", "short")
        await close(dealer)
        return ready, other.hand_id

    ready, other = asyncio.run(run())
    assert other not in ready and len(ready) == 2
