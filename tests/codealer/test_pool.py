"""The co-dealt deck pool: decks made ahead, taken once (also across a restart), refilled round
robin across tenants. The dealer's side runs in process against a real in-process co-dealer
(``CoDealer`` over its own SQLite ledger), so the crypto and both stores are real."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands
from fairdeck_server.dealing.codeal_dealing import DeckPool
from tests.support.codeal_pool import close, fill, logged_setups, make_dealer, pooled
from tests.support.fixtures import TableFactory
from tests.support.waits import WAIT_S, wait_for


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


def test_codealer_restored_ended_the_pooled_decks_and_the_next_opens_failed_at_their_first_draw(
    tmp_path: Path,
) -> None:
    """``fairdeck codealer restored`` ends every hand its ledger holds open, the dealer's pooled
    decks too; the dealer handed them over as they were, and each such hand failed its first draw
    (HAND_CLOSED) until the pool drained. Now a dead deck is dropped at the open and a live one
    taken (here, made fresh): the open's first draw deals."""

    async def run() -> tuple[list[str], list[str], str, int, list[str]]:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("t1", "short")], 3)
        ready = pooled(tmp_path)
        codealer = dealer.link.codealer  # type: ignore[attr-defined]
        assert codealer.ledger.end_open_hands(1_700_000_000_000) == 3  # what `restored` does
        hands = [await dealer.open_hand("t1", "short") for _ in range(2)]
        drawn = [await dealer.draw("t1", hand.hand_id, 1, b"") for hand in hands]
        left = pooled(tmp_path)
        await close(dealer)
        return ready, [h.hand_id for h in hands], str(drawn[0].cards), len(drawn), left

    ready, hands, cards, drawn, left = asyncio.run(run())
    assert drawn == 2 and cards
    assert not set(hands) & set(ready)  # every ended deck dropped, the hands made fresh
    assert left == []  # and none of them is pooled any more
    assert sorted(logged_setups(tmp_path)) == sorted(hands)  # a dropped deck was never logged


def test_a_pooled_deck_ended_there_is_recognised_as_the_grpc_link_relays_the_refusal() -> None:
    from fairdeck.wire import Reason
    from fairdeck_server import refusals
    from fairdeck_server.dealing.codeal_ended import ended_there

    def relayed(said: str) -> refusals.DealerError:  # as edge/codealer_link.py words it
        return refusals.codeal(Reason.CODEALER_REFUSED, f"the co-dealer refused ({said}): details")

    assert ended_there(relayed("FAILED_PRECONDITION HAND_CLOSED"))
    assert ended_there(relayed("NOT_FOUND HAND_NOT_FOUND"))
    assert not ended_there(relayed("FAILED_PRECONDITION HAND_ALREADY_SHUFFLED"))
    assert not ended_there(refusals.codeal(Reason.CODEALER_UNAVAILABLE, "down"))


def test_a_pooled_open_with_the_codealer_down_fails_and_leaves_the_deck_pooled(tmp_path: Path) -> None:
    """The check of a pooled deck needs its co-dealer: down, the open fails UNAVAILABLE (its first
    draw would have failed too) and the deck stays pooled as it was, never taken half."""
    import pytest

    from fairdeck.wire import Reason
    from fairdeck_server import refusals

    async def down(*args: object) -> tuple[bytes, bytes, bytes]:
        raise refusals.codeal(Reason.CODEALER_UNAVAILABLE, "the co-dealer is unreachable")

    async def run() -> tuple[list[str], list[str], str]:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("t1", "short")], 2)
        ready = pooled(tmp_path)
        real = dealer.link.announce
        dealer.link.announce = down  # type: ignore[method-assign,assignment]
        with pytest.raises(refusals.DealerError) as refused:
            await dealer.open_hand("t1", "short")
        still = pooled(tmp_path)
        dealer.link.announce = real  # type: ignore[method-assign]
        taken = await dealer.open_hand("t1", "short")
        await close(dealer)
        assert refused.value.reason == Reason.CODEALER_UNAVAILABLE
        return ready, still, taken.hand_id

    ready, still, taken = asyncio.run(run())
    assert sorted(still) == sorted(ready) and taken in ready


@pytest.mark.parametrize("size", [1, 2, 3, 16])
def test_an_empty_small_pool_refilled_only_once_calls_stopped(tmp_path: Path, size: int) -> None:
    """A refill waits for the dealer to be idle unless the pool is below a quarter of its target;
    a quarter of 1 to 3 is 0, so an empty pool of that size waited while calls kept coming and every
    open shuffled on its path. Calls that never stop here (the last one an hour ahead): an empty
    pool of any size refills at once."""

    async def run() -> None:
        dealer = make_dealer(tmp_path)
        pool = DeckPool(dealer, size)
        pool._last_call = time.monotonic() + 3600  # a co-dealt call, again and again
        await asyncio.wait_for(pool._idle(("t1", "short")), timeout=WAIT_S)  # not an hour
        await close(dealer)

    asyncio.run(run())


def ready(data: Path, size: int) -> tuple[list[str]] | None:
    """The pooled decks' ids, once there are ``size`` or more (in a tuple: none pooled is an answer)."""
    ids = pooled(data)
    return (ids,) if len(ids) >= size else None


@pytest.mark.parametrize("size", [0, 3])
def test_serve_codeal_pool_sets_how_many_decks_are_kept_ahead(
    codealt_table_factory: TableFactory, tmp_path: Path, size: int
) -> None:
    """``--codeal-pool`` feeds the pool through a real ``fairdeck serve`` (the flag given last wins
    over the test tables' own): 0 pools nothing, each open shuffles its deck on its path (with the
    flag not wired, a deck is pooled after the first open); 3 fills after the first open, a later
    open takes one of them, and it is refilled (the pool's own rules: test_pooled_decks_...)."""
    _, dealer = codealt_table_factory("--codeal-pool", str(size))
    data = tmp_path / "data"
    with DealerClient(dealer.target, timeout=60) as client:
        hands = CodealHands(client)
        first = hands.open_hand("standard").hand_id
        seen = [wait_for(f"{size} decks pooled", lambda: ready(data, size))[0]]
        second = hands.open_hand("standard").hand_id
        seen.append(wait_for(f"{size} decks pooled again", lambda: ready(data, size))[0])
    assert [len(ids) for ids in seen] == [size, size], seen
    assert first not in seen[0] and (second in seen[0]) == (size > 0)  # taken from the pool when there is one
    assert len(pooled(data)) == size
    with sqlite3.connect(data / "codeal.db") as db:  # a deck ever pooled keeps its pool_tenant, taken or not
        (ever,) = db.execute("SELECT count(*) FROM codeal_hands WHERE pool_tenant != ''").fetchone()
    assert (ever == 0) == (size == 0), ever
