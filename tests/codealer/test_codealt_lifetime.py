"""Co-dealt hands have the ordinary hands' lifetime (``serve --max-hand-lifetime``): one a game
server abandons is voided within it (closed as CloseHand closes it, its shares and seeds logged),
its co-dealer's ledger may then prune it, decks pooled for a tenant that never comes back are
retired, and a co-dealer that is down delays only the co-dealt voids. Real ``fairdeck codealer``
and ``fairdeck serve`` processes on 127.0.0.1:0, a short lifetime."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, seat_releases
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, decode_entry
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck.wire import Reason
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_log import CodealLog
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.codeal_voids import CodealReaper
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.reaper import MAX_MARGIN_MS
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.codeal_pool import InProcessLink, hand_of, in_process, logged
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.faults import metric
from tests.support.forked_serve import ServeForker
from tests.support.logs import read_entries
from tests.support.waits import wait_for

LIFETIME_S = 4


def ledger_hands(directory: Path) -> dict[str, bool]:
    db = sqlite3.connect(f"file:{directory / 'codealer.db'}?mode=ro", uri=True)
    try:
        return {str(h): bool(r) for h, r in db.execute("SELECT hand_id, revealed FROM hands")}
    finally:
        db.close()


def pooled(data_dir: Path) -> int:
    db = sqlite3.connect(f"file:{data_dir / 'codeal.db'}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT count(*) FROM codeal_hands WHERE tenant = ''").fetchone()[0])
    finally:
        db.close()


@pytest.mark.serial
def test_an_abandoned_codealt_hand_stayed_open_forever_now_voided_within_its_lifetime(tmp_path: Path) -> None:
    """A co-dealt hand whose game server went away stayed open for ever: in codeal.db, in the
    co-dealer's ledger (never pruned) and in the log (a setup and shuffles, no seeds). It is now
    voided before its lifetime ends, as a close: the shares of the positions dealt and both seeds
    logged, the co-dealer's seed revealed so its ledger may prune it. Serial: the void is held to
    a time bar (its lifetime, less the margin, plus a close's work measured side by side).
    (The pool's decks: the next test, which holds nothing to a time bar.)"""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    # The void sends no seat releases: the co-dealer's hold (spec 9.3) must pass before the void.
    with CodealerProcess(directory, "127.0.0.1:0", "--reveal-hold", "1") as codealer:
        flags = (
            *codealer.dealer_flags(),
            "--max-hand-lifetime",
            str(LIFETIME_S),
            "--metrics-listen",
            "127.0.0.1:0",
        )
        data_dir = tmp_path / "data"
        with DealerProcess(data_dir, tmp_path / "dealer.log", *flags) as dealer:
            stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
            # The void's own work, measured side by side on this dealer at this moment: a twin
            # hand dealt the same way and closed by its game server (CloseHand, with its seat's
            # releases): the same reveal, shares and seeds logged.
            with DealerClient(dealer.target, timeout=60) as client:
                hands, seat_key = CodealHands(client), SeatKey.generate()
                twin = hands.open_hand("short")
                sealed = hands.draw(twin.hand_id, 2, seat_public_key=seat_key.public_key).sealed_cards
                hands.draw(twin.hand_id, 1)
                releases = seat_releases(twin, sealed, seat_key)
                started = time.monotonic()
                hands.close_hand(twin.hand_id, seat_releases=releases)
                close_ms = (time.monotonic() - started) * 1000
            codealt = pb.OpenHandRequest(deck="short", mode=pb.DEAL_MODE_CODEALT)
            hand_id = stub.OpenHand(codealt, timeout=60).hand.hand_id
            seat = SeatKey.generate().public_key
            stub.DrawCards(pb.DrawCardsRequest(hand_id=hand_id, count=2, seat_public_key=seat), timeout=60)
            stub.DrawCards(pb.DrawCardsRequest(hand_id=hand_id, count=1), timeout=60)
            # ... and the game server is gone.
            wait_for(
                "the abandoned hand voided",
                lambda: hand_of(stub, hand_id).state == pb.HAND_STATE_CLOSED,
                timeout=120,
            )
            hand = hand_of(stub, hand_id)
            lived_ms = hand.close_time.ToMilliseconds() - hand.create_time.ToMilliseconds()
            # Due at ``lifetime - margin`` (never before: the dealer's clock, exact on an injected
            # clock below), then done within a reaper period and the work of a close, not a held
            # retry. The margin is what lets that fit in the lifetime on a machine not overloaded;
            # the work is the twin's, times 4 for the noise of a shared machine.
            margin_ms = min(MAX_MARGIN_MS, LIFETIME_S * 1000 // 4)
            period_ms = margin_ms / 4
            due_ms = LIFETIME_S * 1000 - margin_ms
            assert due_ms <= lived_ms <= due_ms + period_ms + 4 * close_ms, (lived_ms, due_ms, close_ms)
            assert len(hand.codeal.seeds) == 2 and [d.position for d in hand.codeal.dealt] == [0, 1, 2]
            # The row reads closed before its closing entries are appended (never logged twice).
            closing = [SETUP, SHUFFLE, SHUFFLE, *[SHARES] * 3, SEALS, SEEDS]
            wait_for("the void's entries logged", lambda: logged(data_dir, hand_id) == closing, timeout=60)
            assert metric(dealer, "fairdeck_codeal_voided_total", kind="hand") >= 1
            assert ledger_hands(directory)[hand_id] is True
    ledger = Ledger(directory / "codealer.db", create=False)
    try:
        assert ledger.prune(2**62) >= 1
        assert ledger.hand(hand_id) is None
    finally:
        ledger.close()


@pytest.mark.light
def test_decks_pooled_for_a_tenant_that_never_comes_back_are_retired_and_ended_at_the_codealer(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """The decks the pool shuffled ahead for a tenant (one co-dealt hand opened its pool), never
    taken because it never came back, are retired within their lifetime and ended at the
    co-dealer, whose ledger may then prune them: none stays pooled or open there for ever. Waits
    only for what must happen, so it runs beside others."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    with CodealerProcess(directory, "127.0.0.1:0", "--reveal-hold", "1", forker=serve_forker) as codealer:
        flags = (*codealer.dealer_flags(), "--max-hand-lifetime", str(LIFETIME_S))
        data_dir = tmp_path / "data"
        with DealerProcess(data_dir, tmp_path / "dealer.log", *flags, forker=serve_forker) as dealer:
            with DealerClient(dealer.target, timeout=60) as client:
                hands, seat_key = CodealHands(client), SeatKey.generate()
                hand = hands.open_hand("short")
                sealed = hands.draw(hand.hand_id, 2, seat_public_key=seat_key.public_key).sealed_cards
                hands.close_hand(hand.hand_id, seat_releases=seat_releases(hand, sealed, seat_key))
            # The tenant is gone: its pool filled behind its one hand, and nothing takes from it.
            wait_for("the tenant's pool filled", lambda: pooled(data_dir) > 0, timeout=60)
            wait_for(
                "the pooled decks retired",
                lambda: pooled(data_dir) == 0 and all(ledger_hands(directory).values()),
                timeout=180,
            )
    ledger = Ledger(directory / "codealer.db", create=False)
    try:
        assert ledger.prune(2**62) >= 1
        assert ledger.counts()[0] == 0
    finally:
        ledger.close()


@pytest.mark.light
def test_a_codealer_down_delays_the_codealt_void_and_nothing_else(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """With its co-dealer down the void of a co-dealt hand cannot be done: it waits (the metric
    says the voids are behind), ordinary hands deal, close and are voided as ever, and the co-dealt
    hand is voided once the co-dealer is back."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    codealer = CodealerProcess(directory, forker=serve_forker)
    try:
        flags = (
            *codealer.dealer_flags(),
            "--max-hand-lifetime",
            str(LIFETIME_S),
            "--metrics-listen",
            "127.0.0.1:0",
        )
        data_dir = tmp_path / "data"
        with DealerProcess(data_dir, tmp_path / "dealer.log", *flags, forker=serve_forker) as dealer:
            stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
            codealt = pb.OpenHandRequest(deck="short", mode=pb.DEAL_MODE_CODEALT)
            hand_id = stub.OpenHand(codealt, timeout=60).hand.hand_id
            stub.DrawCards(pb.DrawCardsRequest(hand_id=hand_id, count=1), timeout=60)
            port = codealer.port
            codealer.stop()
            abandoned = stub.OpenHand(pb.OpenHandRequest(deck="standard"), timeout=60).hand.hand_id
            wait_for(
                "the co-dealt voids behind",
                lambda: metric(dealer, "fairdeck_codeal_voids_behind") == 1,
                timeout=120,
            )
            assert hand_of(stub, hand_id).state != pb.HAND_STATE_CLOSED
            # Ordinary work goes on: a hand dealt and closed, one abandoned voided in time.
            ordinary = stub.OpenHand(pb.OpenHandRequest(deck="standard"), timeout=10).hand.hand_id
            assert len(stub.DrawCards(pb.DrawCardsRequest(hand_id=ordinary, count=5), timeout=10).cards) == 5
            assert stub.CloseHand(pb.CloseHandRequest(hand_id=ordinary), timeout=10).hand.state == (
                pb.HAND_STATE_CLOSED
            )
            wait_for(
                "the abandoned ordinary hand voided",
                lambda: hand_of(stub, abandoned).state == pb.HAND_STATE_CLOSED,
                timeout=60,
            )
            assert metric(dealer, "fairdeck_reaper_behind") == 0
            # Back on its address.
            codealer = CodealerProcess(directory, f"127.0.0.1:{port}", forker=serve_forker)
            wait_for(
                "the co-dealt hand voided",
                lambda: hand_of(stub, hand_id).state == pb.HAND_STATE_CLOSED,
                timeout=120,
            )
            wait_for("caught up", lambda: metric(dealer, "fairdeck_codeal_voids_behind") == 0, timeout=60)
            assert logged(data_dir, hand_id) == [SETUP, SHUFFLE, SHUFFLE, SHARES, SEALS, SEEDS]
            log = dealer.stderr_path.read_text()
    finally:
        codealer.stop()
    assert log.count("voiding co-dealt hands failed") == 1, log
    assert "Traceback" not in log


def test_codealt_voids_take_tenants_in_turn_and_none_before_its_time(tmp_path: Path) -> None:
    """On the dealer's injected clock, through the real dealer, co-dealer and SQLite files: a hand
    open ``lifetime - margin`` is not voided yet, one open a millisecond longer is; and a
    tenant that abandoned many hands does not have the others' voids wait behind all of them (its
    hands and the other tenant's are voided in turns)."""
    now = [1_700_000_000_000]
    _, dealer, storage = in_process(tmp_path, now)
    asyncio.run(storage.start())
    reaper = CodealReaper(dealer, LIFETIME_S, lambda: now[0])

    async def scene() -> tuple[str, list[int], list[str], str]:
        # Due a quarter of the lifetime early (the time the void has to be done in), never sooner.
        due = LIFETIME_S * 1000 - min(MAX_MARGIN_MS, LIFETIME_S * 1000 // 4)
        first = (await dealer.open_hand("many", "short")).hand_id
        now[0] += due
        handled = [await reaper.round()]  # open exactly ``due``: not voided yet
        now[0] += 1
        handled.append(await reaper.round())
        many = [(await dealer.open_hand("many", "short")).hand_id for _ in range(4)]
        now[0] += 1
        one = (await dealer.open_hand("one", "short")).hand_id
        await dealer.draw("one", one, 1, b"")
        now[0] += due + 1
        handled.append(await reaper.round())
        return first, handled, many, one

    first, handled, many, one = asyncio.run(scene())
    assert handled == [0, 1, 5]
    seeds = [decode_entry(e).hand_id for e in read_entries(tmp_path) if e[4] == SEEDS]
    many.sort()  # opened in one millisecond: oldest first, then by id
    assert seeds == [first, many[0], one, *many[1:]]  # "one" waits for one of "many"'s, not four
    assert asyncio.run(dealer.get("one", one)).public.get("voided") is True
    assert reaper.voided == 6
    asyncio.run(dealer.aclose())
    asyncio.run(storage.close())


def test_a_codealt_close_the_log_refused_stayed_unlogged_without_a_retry_now_the_reaper_logs_it(
    tmp_path: Path,
) -> None:
    """A CloseHand stores the close, then logs it; when the log refused the append (storage down)
    only a later CloseHand logged it, and a game server that went away never sends one: the hand
    stayed open in the log for ever. The reaper logs it once a margin has passed."""
    now = [1_700_000_000_000]
    codealer = CoDealer(
        Ledger(tmp_path / "codealer.db"),
        Ed25519PrivateKey.from_private_bytes(bytes(32)),
        SeedVault(bytes(range(32))),
        clock_ms=lambda: now[0],
    )
    vault = SeedVault(bytes(range(1, 33)))

    async def scene() -> tuple[str, list[int], list[int]]:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        dealer = CodealDealer(
            InProcessLink(codealer),
            codealer.identity_key,
            CodealStore(tmp_path / "codeal.db"),
            vault,
            log=CodealLog(Dealer(storage, vault)),
            new_hand_id=_new_hand_id,
            clock_ms=lambda: now[0],
        )
        reaper = CodealReaper(dealer, 3600, lambda: now[0])
        hand_id = (await dealer.open_hand("t", "short")).hand_id
        await dealer.draw("t", hand_id, 2, b"")
        await storage.close()  # the log's storage goes away as the hand closes
        with pytest.raises(DealerError) as refused:
            await dealer.close("t", hand_id)
        assert refused.value.reason == Reason.STORAGE_UNAVAILABLE, refused.value
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        dealer.log = CodealLog(Dealer(storage, vault))
        before = [e[4] for e in read_entries(tmp_path) if decode_entry(e).hand_id == hand_id]
        now[0] += reaper.margin_ms + 1
        await reaper.round()
        after = [e[4] for e in read_entries(tmp_path) if decode_entry(e).hand_id == hand_id]
        await dealer.aclose()
        await storage.close()
        return hand_id, before, after

    _, before, after = asyncio.run(scene())
    assert before == [SETUP, SHUFFLE, SHUFFLE]
    assert after == [SETUP, SHUFFLE, SHUFFLE, SHARES, SHARES, SEALS, SEEDS]
