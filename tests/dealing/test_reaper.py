"""The reaper voids every stale hand it can, even when one cannot be voided.

A hand whose sealed seed does not open (sealed under a key the dealer no
longer has) used to make ``void_stale`` raise on it first in every round, so
no stale hand of any tenant was voided any more and the audit reported them
all as possible deck shopping. Real dealers, real SQLite files, real keys.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.models import HandState
from fairdeck.log.logentry import VOIDED, RevealEntry, decode
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.reaper import Reaper
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.dealers import RunningDealer
from tests.support.ops import sample, scrape_until
from tests.support.waits import wait_for


def test_a_hand_that_cannot_be_unsealed_does_not_stall_the_reaper_for_every_tenant(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        now = [1_000_000]
        old_key, new_key = secrets.token_bytes(32), secrets.token_bytes(32)
        # The oldest hand was sealed under a key the dealer no longer loads.
        before = Dealer(storage, SeedVault(old_key), clock_ms=lambda: now[0])
        lost = await before.open_hand("alice", "standard", "")
        now[0] += 1
        dealer_ = Dealer(storage, SeedVault(new_key), clock_ms=lambda: now[0])
        alice = await dealer_.open_hand("alice", "standard", "")
        bob = [await dealer_.open_hand("bob", "short", "") for _ in range(3)]
        now[0] += 10_000
        fresh = await dealer_.open_hand("bob", "standard", "")  # not stale yet
        skipped: list[tuple[str, str, str]] = []

        handled = await dealer_.void_stale(5_000, on_skip=lambda *s: skipped.append(s))

        assert skipped == [("alice", lost.hand_id, "SEED_UNAVAILABLE")]
        assert handled == 5  # four voided, one skipped
        for tenant, hand in [("alice", alice), *(("bob", h) for h in bob)]:
            record = await storage.get_hand(tenant, hand.hand_id)
            assert record is not None and record.state.name == "CLOSED"
            assert record.reveal_index is not None
            (entry,) = await storage.log_entries(record.reveal_index, record.reveal_index + 1)
            reveal = decode(entry)
            assert isinstance(reveal, RevealEntry) and reveal.outcome == VOIDED
        still = await storage.get_hand("alice", lost.hand_id)
        assert still is not None and still.state.name == "OPEN"
        open_fresh = await storage.get_hand("bob", fresh.hand_id)
        assert open_fresh is not None and open_fresh.state.name == "OPEN"

        # The next round neither retries nor reports the skipped hand again,
        # and ends (the reaper loops while a round handled something).
        assert await dealer_.void_stale(5_000, on_skip=lambda *s: skipped.append(s)) == 0
        assert len(skipped) == 1
        # More skipped hands than the limit do not hide the hands behind them.
        for _ in range(3):
            await before.open_hand("carol", "standard", "")
        late = await dealer_.open_hand("carol", "standard", "")
        now[0] += 10_000
        rounds = []
        while handled := await dealer_.void_stale(5_000, limit=2, on_skip=lambda *s: skipped.append(s)):
            rounds.append(handled)
        assert sum(rounds) == 5 and max(rounds) == 2  # 3 skipped, late and fresh voided
        for tenant, hand_id in (("carol", late.hand_id), ("bob", fresh.hand_id)):
            record = await storage.get_hand(tenant, hand_id)
            assert record is not None and record.state.name == "CLOSED"
        assert len(skipped) == 4
        await storage.close()

    asyncio.run(scenario())


def test_the_running_reaper_skips_a_hand_whose_seed_does_not_open_and_voids_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "d"
    with RunningDealer(data) as running, DealerClient(running.target) as c:
        hands = [c.open_hand("standard").hand_id for _ in range(4)]
    # A seed key that is not the store's is refused at start (tests/run/test_startup_refusals.py),
    # which checks one hand per key id: the first. A later hand's sealed seed can still fail to
    # open, its row altered (bit rot, a bad restore): flip one byte of its ciphertext.
    others, lost_id = hands[:3], hands[3]
    with sqlite3.connect(data / "fairdeck.db") as db:
        (sealed,) = db.execute("SELECT sealed_seed FROM hands WHERE hand_id = ?", (lost_id,)).fetchone()
        damaged = bytearray(sealed)
        damaged[20] ^= 0x01
        db.execute("UPDATE hands SET sealed_seed = ? WHERE hand_id = ?", (bytes(damaged), lost_id))
    caplog.set_level(logging.INFO)
    with (
        RunningDealer(data, max_hand_lifetime=0.2, metrics_listen="127.0.0.1:0") as running,
        DealerClient(running.target) as c,
    ):
        wait_for(
            "the other hands voided",
            lambda: all(c.get(h).state is HandState.CLOSED for h in others),
            every=0.1,
        )
        assert [c.get(h).state for h in others] == [HandState.CLOSED] * 3
        assert c.get(lost_id).state is HandState.OPEN
        s = scrape_until(
            running,
            lambda s: sample(s, "fairdeck_reaper_skipped_hands_total", reason="SEED_UNAVAILABLE") == 1,
        )
        assert sample(s, "fairdeck_reaper_skipped_hands_total", reason="SEED_UNAVAILABLE") == 1
        assert sample(s, "fairdeck_hands_closed_total", outcome="voided") == 3
    lines = [r.getMessage() for r in caplog.records if lost_id in r.getMessage()]
    assert len(lines) == 1, lines  # reported once, not every round
    assert "SEED_UNAVAILABLE" in lines[0] and "tenant default" in lines[0]
    assert not any(r.exc_info for r in caplog.records if r.name.startswith("fairdeck"))
    assert not any("voiding stale hands failed" in r.getMessage() for r in caplog.records)
    # No seed in any log line: the sealed blob of the lost hand, in hex, appears nowhere.
    with sqlite3.connect(data / "fairdeck.db") as db:
        (sealed,) = db.execute("SELECT sealed_seed FROM hands WHERE hand_id = ?", (lost_id,)).fetchone()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert bytes(sealed)[17:].hex() not in text


def test_an_entry_waits_only_for_the_hands_it_would_make_overdue_not_for_the_whole_round(
    tmp_path: Path,
) -> None:
    """Every entry-logging call waited for the reaper's whole round: behind thousands of stale
    hands, for all of them. It now waits until the hands older than the lifetime (less half the
    margin) are voided; the younger stale hands are voided after it returns."""

    async def scenario() -> None:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        now = [1_000_000]
        dealer_ = Dealer(storage, SeedVault(secrets.token_bytes(32)), clock_ms=lambda: now[0])
        async for _ in await dealer_.deal_hands("old", "short", 50, [], False):
            pass  # created at 1,000,000: overdue at 1,010,000
        now[0] += 1_500
        async for _ in await dealer_.deal_hands("young", "short", 6_000, [], False):
            pass  # created at 1,001,500: stale (lifetime - margin) at 1,009,500, not yet overdue
        reaper = Reaper(dealer_.voider, 10.0, lambda: now[0])  # margin 2 s
        now[0] = 1_000_000 + 10_000 + 400  # an entry now needs every hand before 1,001,400 voided
        await reaper.ensure_fresh()
        assert await storage.open_hands("old") == 0
        assert await storage.open_hands("young") > 3_000, "the call waited for the young hands' voids"
        await reaper.round()
        assert await storage.open_hands("young") == 0
        await storage.close()

    asyncio.run(scenario())


def test_the_reaper_says_it_is_behind_when_an_entry_would_wait_past_a_second() -> None:
    now = [1_000_000]
    told: list[bool] = []
    reaper = Reaper(None, 10.0, lambda: now[0], on_behind=told.append)  # type: ignore[arg-type]
    reaper.closed_before_ms = now[0] - 10_000 + 2_000  # a pass just ended
    assert not reaper.look() and reaper.fresh()
    now[0] += 1_000 + 1_000 + 1  # half the margin, then BEHIND_MS, then past it
    assert reaper.look() and told == [True]
    reaper.closed_before_ms = now[0]
    assert not reaper.look() and told == [True, False]
