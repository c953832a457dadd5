"""Hands the co-dealer's dealer never closes (it died, lost its codeal.db, or pooled a deck nobody
took) are ended by the co-dealer itself once they are ``codealer serve --max-hand-lifetime`` old:
no share is given for them from then on, the end is in the ledger before anything about it is
answered, retention can drop them, and the operator is told. The end is the state a reveal makes,
so a dealer that comes back still closes such a hand with its whole record logged, and a close
racing the end completes either way. A dealer whose own lifetime the co-dealer's cannot serve is
refused co-dealt opens. Real ``fairdeck codealer`` and ``fairdeck serve`` processes on 127.0.0.1:0,
and the real code in process on an injected clock for the races."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.client.exceptions import from_rpc_error
from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE
from fairdeck.v1 import codealer_pb2, dealer_pb2_grpc
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.wire import Reason
from fairdeck_server.cli.codealer_command import _expire, _expire_pass, _prune_pass
from fairdeck_server.codealer import ledger as ledger_module
from fairdeck_server.codealer.ledger import Ledger, LedgerError
from fairdeck_server.dealing.codeal_store import CodealRow
from fairdeck_server.dealing.codeal_voids import CodealReaper
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import InProcessLink, hand_of, in_process, logged
from tests.support.codealers import CODEAL, NOT_SERVING, CodealerProcess, init_codealer, status
from tests.support.dealers import DealerProcess
from tests.support.faults import metric
from tests.support.forked_serve import ServeForker
from tests.support.waits import wait_for, wait_for_async

CODEALER_LIFETIME_S = 8
DEALER_LIFETIME_S = 4  # the most a co-dealer of 8 s serves: a pooled deck waits one, lives one


def ended_here(directory: Path) -> dict[str, tuple[bool, bool]]:
    """hand id -> (ended, ended by the co-dealer's lifetime), read from the ledger apart."""
    db = sqlite3.connect(f"file:{directory / 'codealer.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT hand_id, revealed, expired FROM hands").fetchall()
    finally:
        db.close()
    return {str(h): (bool(r), bool(x)) for h, r, x in rows}


def all_ended(directory: Path) -> dict[str, tuple[bool, bool]]:
    """The ledger's hands once every one has ended, else {}."""
    hands = ended_here(directory)
    return hands if all(ended for ended, _ in hands.values()) else {}


@contextlib.contextmanager
def locked_after_one_commit(ledger: Ledger) -> Iterator[list[object]]:
    """While held, ``ledger``'s first transaction commits (its result in the list yielded) and
    every later one raises LedgerError, as a disk or a lock held too long would."""
    real = ledger.transaction
    batches: list[object] = []

    def transaction(work: Callable[[sqlite3.Connection], object]) -> object:
        if batches:
            raise LedgerError("co-dealer ledger codealer.db: database is locked")
        batches.append(real(work))
        return batches[-1]

    ledger.transaction = transaction  # type: ignore[method-assign,assignment]
    try:
        yield batches
    finally:
        ledger.transaction = real  # type: ignore[method-assign]


def codealer(directory: Path, forker: ServeForker) -> CodealerProcess:
    # A 1 s hold (spec 9.3): the dealer's voids, which carry no seat releases, are answered.
    lifetime = ("--max-hand-lifetime", str(CODEALER_LIFETIME_S))
    return CodealerProcess(directory, "127.0.0.1:0", *lifetime, "--reveal-hold", "1", forker=forker)


def dealer_flags(codealer: CodealerProcess, lifetime_s: float = DEALER_LIFETIME_S) -> tuple[str, ...]:
    return (
        *codealer.dealer_flags(),
        "--max-hand-lifetime",
        str(lifetime_s),
        "--metrics-listen",
        "127.0.0.1:0",
    )


def open_and_deal(target: str) -> str:
    """A co-dealt hand with two cards sealed to a seat and one public: its id."""
    stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(target))
    hand_id = str(
        stub.OpenHand(pb.OpenHandRequest(deck="short", mode=pb.DEAL_MODE_CODEALT), timeout=60).hand.hand_id
    )
    seat = SeatKey.generate().public_key
    stub.DrawCards(pb.DrawCardsRequest(hand_id=hand_id, count=2, seat_public_key=seat), timeout=60)
    stub.DrawCards(pb.DrawCardsRequest(hand_id=hand_id, count=1), timeout=60)
    return hand_id


@pytest.mark.light
def test_an_orphan_codealt_hand_stayed_open_at_the_codealer_forever_now_ended_at_its_lifetime(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """The dealer dies and its codeal.db is lost: nobody will ever close its hand or the decks its
    pool shuffled ahead. They stayed open in the co-dealer's ledger for ever, their shares still
    given to whoever asked, never pruned. Now the co-dealer ends them at its lifetime: a share is
    refused FAILED_PRECONDITION HAND_CLOSED naming the lifetime, its operator is told, its identity
    answer counts them, and retention drops them."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    with codealer(directory, serve_forker) as running:
        dealer = DealerProcess(
            tmp_path / "data", tmp_path / "dealer.log", *dealer_flags(running), forker=serve_forker
        )
        hand_id = open_and_deal(dealer.target)
        dealer.kill9()
        for lost in (tmp_path / "data").glob("codeal.db*"):
            lost.unlink()
        hands = wait_for(
            "the co-dealer ends every hand of the lost dealer", lambda: all_ended(directory), timeout=120
        )
        assert hands[hand_id] == (True, True)
        with pytest.raises(grpc.RpcError) as refused:
            running.stub().GetShare(codealer_pb2.GetShareRequest(hand_id=hand_id, position=3, count=1))
        error = from_rpc_error(refused.value)
        assert (refused.value.code(), error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "HAND_CLOSED")
        assert "--max-hand-lifetime" in str(refused.value.details())
        # The rows are ended at the batch's commit; the sweep counts them and tells the operator
        # after it (and its last, empty batch): its WARNING, written after its count, is the end.
        told = (
            f"hands not closed {CODEALER_LIFETIME_S} s after their announce "
            f"(--max-hand-lifetime; {len(hands)} since start)"
        )
        wait_for("the operator told of every hand", lambda: told in running.log_so_far(), timeout=60)
        identity = running.stub().GetIdentity(codealer_pb2.GetIdentityRequest())
        assert identity.max_hand_lifetime_ms == CODEALER_LIFETIME_S * 1000
        assert identity.expired_hands == len(hands)
        log = running.stop()
    assert told in log, log
    assert "Traceback" not in log
    ledger = Ledger(directory / "codealer.db", create=False)
    try:
        assert ledger.prune(2**62) == len(hands) and ledger.counts() == (0, 0)
    finally:
        ledger.close()


def test_a_stop_after_the_codealers_end_was_committed_lost_its_warning_for_good_now_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop (SIGTERM) cancels the co-dealer's sweep. One landing after the sweep committed its
    end, while its thread finished (its last, empty batch, its count), lost the count and the
    WARNING, written after the awaited thread: for good, as no later sweep finds the hands ended,
    and the WARNING is its operator's only word that the dealer left hands. The sweep's thread now
    counts and writes the WARNING after the cancel, as here (``serve``'s ``asyncio.run`` waits for
    the thread at its end: Python's, not shown here)."""
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, CODEALER_LIFETIME_S * 1000)
    committed, release = threading.Event(), threading.Event()
    real_expire = codealer.ledger.expire

    def expire_then_hold(created_before_ms: int, now_ms: int, *counted: Callable[[int], object]) -> int:
        ended = real_expire(created_before_ms, now_ms, *counted)
        committed.set()
        assert release.wait(60)  # the stop comes here, the end on disk
        return ended

    async def scene() -> None:
        await storage.start()
        await dealer.open_hand("t", "short")
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        codealer.ledger.expire = expire_then_hold  # type: ignore[method-assign,assignment]
        sweeping = asyncio.create_task(_expire(codealer, threading.Event()))
        await wait_for_async("the sweep's end committed", committed.is_set)
        sweeping.cancel()  # what `serve` does at SIGTERM
        with contextlib.suppress(asyncio.CancelledError):
            await sweeping
        release.set()
        await dealer.aclose()
        await storage.close()

    caplog.set_level(logging.WARNING)
    asyncio.run(scene())
    ended = sum(by_lifetime for _, by_lifetime in ended_here(tmp_path).values())
    assert ended >= 1 and codealer.expired == ended
    said = [r.getMessage() for r in caplog.records if "after their announce" in r.getMessage()]
    told = f"ended {ended} hands not closed {CODEALER_LIFETIME_S} s after their announce"
    assert any(told in line for line in said), said


def test_a_sweep_failing_after_a_committed_batch_counted_and_told_nothing_now_counts_those_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A sweep commits each batch of ends, then tries the next. A LedgerError after a commit (the
    disk, a lock held too long) lost the count of the hands ended before it: not in GetIdentity's
    count, no WARNING, only the failure's; for good, as no later sweep finds them (they are
    ended). They are now counted as each batch commits and the sweep's WARNING names them."""
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, CODEALER_LIFETIME_S * 1000)
    batches: list[object] = []

    async def scene() -> None:
        await storage.start()
        await dealer.open_hand("t", "short")
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        with locked_after_one_commit(codealer.ledger) as committed:
            sweeping = asyncio.create_task(_expire(codealer, threading.Event()))
            await wait_for_async("the sweep's failure", lambda: "failed (co-dealer ledger" in caplog.text)
            sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeping
        batches.extend(committed)
        await dealer.aclose()
        await storage.close()

    caplog.set_level(logging.WARNING)
    asyncio.run(scene())
    ended = sum(by_lifetime for _, by_lifetime in ended_here(tmp_path).values())
    assert ended >= 1 and batches == [ended] and codealer.expired == ended
    said = [r.getMessage() for r in caplog.records if "after their announce" in r.getMessage()]
    assert [line.split(" hands not closed")[0] for line in said] == [f"ended {ended}"], said


@pytest.mark.light
def test_a_dealer_back_after_the_codealer_ended_its_hand_voids_it_with_its_whole_record(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """A dealer down longer than the co-dealer's lifetime comes back to hands the co-dealer ended
    meanwhile: its reaper voids them as closes, with every entry logged (the co-dealer's end keeps
    the seed and the dealt positions' public shares for the dealer's close), not an error loop."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    data_dir = tmp_path / "data"
    with codealer(directory, serve_forker) as running:
        first = DealerProcess(data_dir, tmp_path / "dealer.log", *dealer_flags(running), forker=serve_forker)
        hand_id = open_and_deal(first.target)
        first.kill9()
        wait_for(
            "the co-dealer ends the hand", lambda: ended_here(directory)[hand_id] == (True, True), timeout=120
        )
        with DealerProcess(
            data_dir, tmp_path / "back.log", *dealer_flags(running), forker=serve_forker
        ) as dealer:
            stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
            wait_for(
                "the hand voided", lambda: hand_of(stub, hand_id).state == pb.HAND_STATE_CLOSED, timeout=120
            )
            hand = hand_of(stub, hand_id)
            assert len(hand.codeal.seeds) == 2 and [d.position for d in hand.codeal.dealt] == [0, 1, 2]
            whole = [SETUP, SHUFFLE, SHUFFLE, SHARES, SHARES, SHARES, SEALS, SEEDS]
            wait_for("its record logged", lambda: logged(data_dir, hand_id) == whole, timeout=60)
            assert metric(dealer, "fairdeck_codeal_voided_total", kind="hand") >= 1
            assert metric(dealer, "fairdeck_codeal_void_skipped_hands_total") == 0
            wait_for(
                "the co-dealer's count of ended hands",
                lambda: metric(dealer, "fairdeck_codealer_expired_hands") >= 1,
                timeout=60,
            )
            log = dealer.stderr()
    assert "cannot be voided" not in log and "Traceback" not in log, log


def test_a_dealer_outliving_its_codealers_lifetime_is_refused_codealt_opens(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """A dealer whose lifetime is over half the co-dealer's would have hands ended by the co-dealer
    while they are played: co-dealt opens are refused FAILED_PRECONDITION CODEAL_NOT_CONFIGURED
    naming both options, its co-dealt health says why, ordinary hands deal on."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    with codealer(directory, serve_forker) as running:
        flags = dealer_flags(running, lifetime_s=CODEALER_LIFETIME_S / 2 + 1)
        with DealerProcess(tmp_path / "data", tmp_path / "dealer.log", *flags, forker=serve_forker) as dealer:
            line = "co-dealt health NOT_SERVING: the co-dealer ends hands 8 s after they open"
            wait_for("the lifetimes refused", lambda: line in dealer.stderr(), timeout=60)
            assert status(dealer.target, CODEAL) == NOT_SERVING
            stub = dealer_pb2_grpc.DealerServiceStub(grpc.insecure_channel(dealer.target))
            with pytest.raises(grpc.RpcError) as refused:
                stub.OpenHand(pb.OpenHandRequest(deck="short", mode=pb.DEAL_MODE_CODEALT), timeout=60)
            assert from_rpc_error(refused.value).reason == "CODEAL_NOT_CONFIGURED"
            assert "--max-hand-lifetime 10 or more" in str(refused.value.details())
            assert stub.OpenHand(pb.OpenHandRequest(deck="short"), timeout=60).hand.hand_id
    assert not any(ended for ended, _ in ended_here(directory).values())


def test_a_close_racing_the_codealers_end_completes_and_a_sealed_share_racing_it_is_refused_whole(
    tmp_path: Path,
) -> None:
    """The end lands between the close's RevealSeed and its public shares: the close completes,
    its record logged whole, and the end is not counted (the close's reveal came first). The end
    lands between a sealed draw's two passes (the rules checked, the seals made): the draw is
    refused HAND_CLOSED and its positions are not recorded as given."""
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, CODEALER_LIFETIME_S * 1000)
    link = dealer.link
    assert isinstance(link, InProcessLink)
    reveal = link.reveal

    async def reveal_then_end(
        hand_id: str, releases: Sequence[bytes] = ()
    ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]:
        answer = await reveal(hand_id, releases)
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        assert codealer.expire() == 1  # the other hand; this one ended by the reveal
        return answer

    seal = codealer._seal

    def seal_then_end(*args: object) -> tuple[bytes, bytes, bytes, bytes]:
        made = seal(*args)  # type: ignore[arg-type]
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        codealer.expire()
        return made

    async def scene() -> tuple[str, str]:
        await storage.start()
        closing = (await dealer.open_hand("t", "short")).hand_id
        racing = (await dealer.open_hand("t", "short")).hand_id
        await dealer.draw("t", closing, 2, b"")
        await dealer.draw("t", racing, 1, SeatKey.generate().public_key)
        link.reveal = reveal_then_end  # type: ignore[method-assign]
        closed = await dealer.close("t", closing)
        assert closed.closed_ms is not None and len(closed.public["seeds"]) == 2
        link.reveal = reveal  # type: ignore[method-assign]
        third = (await dealer.open_hand("t", "short")).hand_id
        codealer._seal = seal_then_end  # type: ignore[method-assign]
        with pytest.raises(DealerError) as refused:
            await dealer.draw("t", third, 1, SeatKey.generate().public_key)
        assert refused.value.reason == Reason.HAND_CLOSED and "--max-hand-lifetime" in str(refused.value)
        await dealer.aclose()
        await storage.close()
        return closing, third

    closing, third = asyncio.run(scene())
    assert logged(tmp_path, closing) == [SETUP, SHUFFLE, SHUFFLE, SHARES, SHARES, SEALS, SEEDS]
    assert ended_here(tmp_path)[closing] == (True, False) and ended_here(tmp_path)[third] == (True, True)
    assert codealer.ledger.shares(third) == {}
    assert codealer.expired == 2


def test_a_codealt_hand_the_codealer_ended_and_pruned_was_skipped_at_every_start_now_voided_alone(
    tmp_path: Path,
) -> None:
    """A dealer back after the co-dealer ended its hand and retention dropped it: the co-dealer
    answers HAND_NOT_FOUND, and the void was skipped with an error at every start of the dealer,
    the hand open in codeal.db for ever. Past the co-dealer's lifetime and a day, the dealer now
    closes it on its side (nothing of its closing can be logged), once; a CloseHand then answers
    it as closed. A co-dealer that says no lifetime (one that may have lost its ledger) still
    gets the hand skipped, never closed."""
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, CODEALER_LIFETIME_S * 1000)
    kinds: list[str] = []

    async def scene() -> tuple[str, set[str], CodealRow, int]:
        await storage.start()
        hand_id = (await dealer.open_hand("t", "short")).hand_id
        await dealer.draw("t", hand_id, 2, b"")
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        assert codealer.expire() == 1
        assert codealer.ledger.prune(now[0] + 1) == 1  # its retention dropped it
        now[0] += 86_400_000
        unsaid = CodealReaper(dealer, DEALER_LIFETIME_S, lambda: now[0])
        await unsaid.round()
        dealer.codealer_lifetime_ms = CODEALER_LIFETIME_S * 1000  # as its identity answer says
        reaper = CodealReaper(dealer, DEALER_LIFETIME_S, lambda: now[0], on_voided=kinds.append)
        handled = [await reaper.round(), await reaper.round()]
        row = await dealer.close("t", hand_id)
        await dealer.aclose()
        await storage.close()
        return hand_id, unsaid.skipped, row, sum(handled)

    hand_id, skipped, row, handled = asyncio.run(scene())
    assert skipped == {hand_id}
    assert kinds == ["gone"] and handled == 1
    assert row.closed_ms is not None and row.public["voided"] and row.public["codealer_gone"]
    assert logged(tmp_path, hand_id) == [SETUP, SHUFFLE, SHUFFLE]


def test_a_close_cut_off_after_the_reveal_and_pruned_there_was_refused_for_ever_now_ends_alone(
    tmp_path: Path,
) -> None:
    """The dealer's close asked the co-dealer for its seed (the co-dealer ended the hand) and the
    dealer went down before it stored the close. Back after ``--keep-closed-days``, the co-dealer
    had pruned the hand: every retry of the close was refused HAND_NOT_FOUND, for ever (a co-dealer
    with no lifetime of its own: the reaper skipped it too). The dealer stored that it asked, so the
    retry now ends the hand on its side alone, once, with no closing entries; before the
    retention's day, the same refusal is still the co-dealer's (never closed alone)."""
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now)  # a co-dealer that ends no hand itself
    real_reveal = dealer.link.reveal

    async def reveal_then_die(
        hand_id: str, releases: Sequence[bytes] = ()
    ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]:
        await real_reveal(hand_id, releases)
        raise ConnectionError("the dealer went down before it stored the close")

    async def scene() -> tuple[str, str, CodealRow, CodealRow]:
        await storage.start()
        hand_id = (await dealer.open_hand("t", "short")).hand_id
        await dealer.draw("t", hand_id, 2, b"")
        dealer.link.reveal = reveal_then_die  # type: ignore[method-assign]
        with pytest.raises(ConnectionError):
            await dealer.close("t", hand_id)
        dealer.link.reveal = real_reveal  # type: ignore[method-assign]
        dealer._rows.clear()  # a restart: the row as stored
        now[0] += 3_600_000
        assert codealer.ledger.prune(now[0]) == 1  # a retention shorter than a day: not the rule
        with pytest.raises(DealerError) as early:
            await dealer.close("t", hand_id)
        now[0] += 86_400_000
        closed = await dealer.close("t", hand_id)
        again = await dealer.close("t", hand_id)
        await dealer.aclose()
        await storage.close()
        return hand_id, str(early.value.reason), closed, again

    hand_id, early, closed, again = asyncio.run(scene())
    assert early in (Reason.HAND_NOT_FOUND, Reason.CODEALER_REFUSED)
    assert closed.closed_ms is not None and closed.public["voided"] and closed.public["codealer_gone"]
    assert again.closed_ms == closed.closed_ms
    assert logged(tmp_path, hand_id) == [SETUP, SHUFFLE, SHUFFLE]


def test_a_stop_during_a_long_sweep_ends_it_after_the_batch_under_way_and_says_what_it_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop waited for the whole sweep, every batch of PRUNE_BATCH a durable write: a backlog
    held SIGTERM until docker or systemd killed the co-dealer, its WARNING with it (a read-only
    review). The sweep now ends after the batch under way once the co-dealer is stopping, and
    its WARNING names the hands it ended; the next start's sweep ends the rest."""
    monkeypatch.setattr(ledger_module, "PRUNE_BATCH", 1)
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, CODEALER_LIFETIME_S * 1000)
    stopping = threading.Event()
    real_transaction = codealer.ledger.transaction

    def stop_in_the_first_batch(work: Callable[[sqlite3.Connection], object]) -> object:
        done = real_transaction(work)
        stopping.set()  # the SIGTERM, while the first batch commits
        return done

    async def scene() -> None:
        await storage.start()
        for _ in range(3):
            await dealer.open_hand("t", "short")
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        codealer.ledger.transaction = stop_in_the_first_batch  # type: ignore[method-assign,assignment]
        await asyncio.to_thread(_expire_pass, codealer, 1.0, stopping)
        codealer.ledger.transaction = real_transaction  # type: ignore[method-assign]
        await dealer.aclose()
        await storage.close()

    caplog.set_level(logging.WARNING)
    asyncio.run(scene())
    hands = ended_here(tmp_path)
    assert len(hands) >= 3 and sum(by_lifetime for _, by_lifetime in hands.values()) == 1, hands
    assert codealer.expired == 1
    said = [r.getMessage() for r in caplog.records if "after their announce" in r.getMessage()]
    assert [line.split(" hands not closed")[0] for line in said] == ["ended 1"], said


def test_a_prune_failing_after_a_committed_batch_says_how_many_it_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prune drops ended hands in batches; a LedgerError after a commit logged only the failure,
    not the hands already dropped (a read-only review: the expiry's fix, not made for prune)."""
    monkeypatch.setattr(ledger_module, "PRUNE_BATCH", 1)
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, CODEALER_LIFETIME_S * 1000)
    batches: list[object] = []

    async def scene() -> None:
        await storage.start()
        for _ in range(2):
            await dealer.open_hand("t", "short")
        now[0] += CODEALER_LIFETIME_S * 1000 + 1
        await asyncio.to_thread(_expire_pass, codealer, 1.0, threading.Event())
        now[0] += 1
        with locked_after_one_commit(codealer.ledger) as committed:
            await asyncio.to_thread(_prune_pass, codealer, 0.0, threading.Event())
        batches.extend(committed)
        await dealer.aclose()
        await storage.close()

    caplog.set_level(logging.INFO)
    asyncio.run(scene())
    assert batches == [1]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(("pruned", "pruning"))]
    assert said[0].startswith("pruned 1 hands that ended over 0 days ago"), said
    assert "pruning the ledger failed (co-dealer ledger codealer.db: database is locked)" in said[1], said


def test_an_unexpected_error_in_a_sweep_is_logged_and_the_next_sweep_still_comes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An error of ours that is not a LedgerError ended the sweep's task with nothing said until
    the task was collected, and no hand was ever ended again (a read-only review): it is now
    logged, with its trace, and the next sweep ends the hands."""
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp_path, now, 400)  # a sweep every 0.1 s
    real_transaction = codealer.ledger.transaction
    calls: list[int] = []

    def fail_once(work: Callable[[sqlite3.Connection], object]) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.Warning("not a LedgerError")  # sqlite3.Warning is no sqlite3.Error
        return real_transaction(work)

    async def scene() -> None:
        await storage.start()
        await dealer.open_hand("t", "short")
        now[0] += 401
        codealer.ledger.transaction = fail_once  # type: ignore[method-assign,assignment]
        sweeping = asyncio.create_task(_expire(codealer, threading.Event()))
        await wait_for_async("a sweep after the failed one", lambda: codealer.expired >= 1)
        sweeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeping
        codealer.ledger.transaction = real_transaction  # type: ignore[method-assign]
        await dealer.aclose()
        await storage.close()

    caplog.set_level(logging.WARNING)
    asyncio.run(scene())
    failed = [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None, caplog.text
