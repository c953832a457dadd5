"""The co-dealer's ledger retention (``serve --keep-closed-days``): hands that ended longer ago
are dropped with their shares; a hand not ended, and one inside the window, never is. The growth
bound runs the real dealer and co-dealer code over real SQLite files on an injected clock; the
option runs through real processes (the co-dealer's wall clock moved by libfaketime)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.client.exceptions import from_rpc_error
from fairdeck.v1 import codealer_pb2, dealer_pb2_grpc
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.wire import Reason
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_log import CodealLog
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.codeal_pool import InProcessLink, seat_tokens
from tests.support.codealers import CODEAL, SERVING, CodealerProcess, init_codealer, status
from tests.support.dealers import DealerProcess
from tests.support.faults import FakeClock, wait_for

DAY_MS = 86_400_000


def test_codealer_ledger_never_pruned_grew_forever_now_bounded_by_the_window_and_open_hands(
    tmp_path: Path,
) -> None:
    """Six days of hands, two ended and one left open each day, pruned daily keeping two days:
    the ledger holds at most the hands that ended inside the window plus every hand not ended,
    the dropped hands' shares go with them, and hands kept still answer the dealer (a retried
    close of an ended hand, a draw and close of a week-old open hand)."""
    keep_days = 2
    now = [1_700_000_000_000]
    ledger = Ledger(tmp_path / "codealer.db")
    codealer = CoDealer(
        ledger,
        Ed25519PrivateKey.from_private_bytes(bytes(32)),
        SeedVault(bytes(range(32))),
        clock_ms=lambda: now[0],
    )
    storage = SqliteStorage(tmp_path / "fairdeck.db")
    starting = threading.Thread(target=asyncio.run, args=(storage.start(),))
    starting.start()
    starting.join()
    vault = SeedVault(bytes(range(1, 33)))
    dealer = CodealDealer(
        InProcessLink(codealer),
        codealer.identity_key,
        CodealStore(tmp_path / "codeal.db"),
        vault,
        log=CodealLog(Dealer(storage, vault)),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: now[0],
    )
    ended: list[list[str]] = []
    left_open: list[str] = []

    async def day() -> None:
        closed = []
        for i in range(3):
            hand = await dealer.make_hand("t", "short")
            seat = SeatKey.generate()
            key = seat.public_key if i == 0 else b""  # sealed: the co-dealer keeps a seal
            draw = await dealer.draw("t", hand.hand_id, 2, key)
            if i < 2:
                tokens = seat_tokens(hand.hand_id, "short", draw, seat) if key else []
                await dealer.close("t", hand.hand_id, releases=tokens)
                closed.append(hand.hand_id)
            else:
                left_open.append(hand.hand_id)
        ended.append(closed)

    for d in range(6):
        asyncio.run(day())
        now[0] += DAY_MS
        ledger.prune(now[0] - keep_days * DAY_MS)
        hands = ledger.counts()[0]
        assert hands <= 2 * keep_days + len(left_open), (d, hands)
        for j, ids in enumerate(ended):
            for hand_id in ids:
                kept = ledger.hand(hand_id) is not None
                assert kept == (j >= d + 1 - keep_days), (d, j)
                assert bool(ledger.shares(hand_id)) == kept
                assert _seals(ledger, hand_id) == (2 if kept and hand_id == ids[0] else 0)
        assert all(ledger.hand(h) is not None for h in left_open)  # never dropped, however old
    assert ledger.counts() == (2 * keep_days + 6, 2 * (2 * keep_days + 6))
    assert codealer.reveal(ended[-1][0])  # the dealer retrying a close inside the window
    with pytest.raises(DealerError) as e:
        codealer.reveal(ended[0][0])
    assert e.value.reason == Reason.HAND_NOT_FOUND
    oldest = left_open[0]
    asyncio.run(dealer.draw("t", oldest, 1, b""))
    asyncio.run(dealer.close("t", oldest))
    assert ledger.prune(now[0] - keep_days * DAY_MS) == 0  # it ended just now: kept its window
    asyncio.run(dealer.aclose())
    asyncio.run(storage.close())
    ledger.close()


def _seals(ledger: Ledger, hand_id: str) -> int:
    """How many seal statements the ledger keeps for ``hand_id`` (its own file, read apart)."""
    with sqlite3.connect(ledger.path) as db:
        return int(db.execute("SELECT count(*) FROM seals WHERE hand_id = ?", (hand_id,)).fetchone()[0])


def ledger_hands(directory: Path) -> dict[str, bool]:
    with sqlite3.connect(f"file:{directory / 'codealer.db'}?mode=ro", uri=True) as db:
        rows = {str(h): bool(r) for h, r in db.execute("SELECT hand_id, revealed FROM hands")}
    db.close()
    return rows


def test_a_codealer_started_with_keep_closed_days_drops_ended_hands_past_the_window(tmp_path: Path) -> None:
    directory = tmp_path / "cd1"
    init_codealer(directory)
    clock = FakeClock(tmp_path / "codealer-clock")
    # A lifetime past the days moved on: this test is about retention, not about the lifetime.
    keep = ("--keep-closed-days", "1", "--max-hand-lifetime", str(7 * 86_400))
    codealer = CodealerProcess(directory, "127.0.0.1:0", *keep, env=clock.env())
    try:
        with DealerProcess(tmp_path / "data", tmp_path / "dealer.log", *codealer.dealer_flags()) as dealer:
            stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
            codealt = pb.OpenHandRequest(deck="short", mode=pb.DEAL_MODE_CODEALT)
            ended = stub.OpenHand(codealt, timeout=60).hand.hand_id
            stub.DrawCards(pb.DrawCardsRequest(hand_id=ended, count=2), timeout=60)
            stub.CloseHand(pb.CloseHandRequest(hand_id=ended), timeout=60)
            running = stub.OpenHand(codealt, timeout=60).hand.hand_id
            stub.DrawCards(pb.DrawCardsRequest(hand_id=running, count=2), timeout=60)
            port = codealer.port
            codealer.stop()
            clock.set(2 * 86_400)  # two days on, at the co-dealer
            codealer = CodealerProcess(directory, f"127.0.0.1:{port}", *keep, env=clock.env())
            wait_for("the ended hand pruned", lambda: ended not in ledger_hands(directory), timeout=60)
            hands = ledger_hands(directory)
            assert hands[running] is False and all(not revealed for revealed in hands.values())
            # The hand still running deals on and closes; the pruned one is unknown to the co-dealer.
            wait_for(
                "the dealer sees its co-dealer", lambda: status(dealer.target, CODEAL) == SERVING, timeout=60
            )

            def draws() -> bool:
                """The health above may still be the one from before the restart, and the dealer's
                channel may still be in its reconnect backoff: a draw refused UNAVAILABLE dealt
                nothing (the co-dealer was not reached) and is retried, as the SDK retries it."""
                try:
                    stub.DrawCards(pb.DrawCardsRequest(hand_id=running, count=1), timeout=60)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    return False
                return True

            wait_for("a draw after the co-dealer's restart", draws, timeout=60)
            closed = stub.CloseHand(pb.CloseHandRequest(hand_id=running), timeout=60).hand
            assert closed.state == pb.HAND_STATE_CLOSED
            with pytest.raises(grpc.RpcError) as e:
                codealer.stub().RevealSeed(codealer_pb2.RevealSeedRequest(hand_id=ended))
            assert from_rpc_error(e.value).reason == "HAND_NOT_FOUND"
    finally:
        log = codealer.stop()
    assert "pruned 1 hands that ended over 1 days ago" in log
