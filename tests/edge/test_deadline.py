"""The dealer's default deadline on a real dealer through the real SDK (edge/deadline.py): a
unary call's whole run; a stream's time between two writes, and its runs in all; and what a cut
call keeps. The SDK's own retries are off (retries=0): these tests watch the dealer's answers."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import DeadlineExceeded
from fairdeck.v1 import dealer_pb2, dealer_pb2_grpc
from fairdeck_server.edge.deadline import STREAM_RUNS
from tests.support.dealers import RunningDealer
from tests.support.error_details import error_info
from tests.support.speed import scaled
from tests.support.waits import hold_silent, pace, wait_for

pytestmark = pytest.mark.paired  # waits out the dealer's deadlines to a bar: two at a time, after the others


def _settled(running: RunningDealer) -> tuple[int, int]:
    """(open hands, log size) once a cut call's last chunk has landed."""
    assert running.server is not None
    storage = running.server.storage
    last = [(-1, -1)]

    def same_twice() -> tuple[int, int] | None:
        now = (running._run(storage.open_hands()), running._run(storage.log_size()))
        if now == last[0]:
            return now
        last[0] = now
        return None

    return wait_for("storage to settle", same_twice, timeout=10, every=0.1)


def test_default_deadline_ends_a_stream_whose_reader_stopped_and_keeps_what_was_stored(
    tmp_path: Path,
) -> None:
    # A 1 s deadline: with 0.2 s, a machine 13 times slower than usual cut the stream before its
    # first response, while the reader still read.
    config = {"default_deadline": 1.0, "max_open_hands": 0, "rate_limit": 0}
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        DealerClient(running.target, retries=0, options=[("grpc.http2.bdp_probe", 0)]) as c,
    ):
        received = 0
        started = time.monotonic()
        hands = c.deal_hands(hand_count=100_000)  # the SDK sets no deadline on DealHands
        next(hands)
        hold_silent(3.0)  # the reader stops: the dealer's writes wait, then its deadline passes
        with pytest.raises(DeadlineExceeded) as cut:
            for _ in hands:
                received += 1
        assert time.monotonic() - started < 4.0 + scaled(3.0)  # the silence and the deadline; the work
        assert cut.value.reason == "DEADLINE_EXCEEDED"
        assert "wrote nothing" in str(cut.value)
        assert received < 100_000 - 1
        opened, entries = _settled(running)
        # Every hand stored has its commitment in the log and nothing else; those sent are among them.
        assert opened == entries >= received
        after = c.open_hand()  # the dealer goes on
        assert after.commit_receipt.index == entries


def test_a_deal_hands_cut_before_its_first_big_batch_was_read_still_ends_with_a_status(
    tmp_path: Path,
) -> None:
    """A batch of 256 `shoe-8` hands (300 KB closed, 200 KB open) is larger than a client's 64 KiB
    window (so is one of `shoe-4`, and of `shoe-2` closed: 67 KB). Cut by the default
    deadline while that first batch waited on the window, the deadline's status carried the
    response headers a second time, gRPC refused it, and the call had no status: its client,
    reading again, got the batch and then waited for ever (the SDK sets no deadline on DealHands;
    here the call's own 30 s ended it). A raw stub: the SDK's generator calls only when read."""
    config = {"default_deadline": 2.0, "max_open_hands": 0, "rate_limit": 0}
    request = dealer_pb2.DealHandsRequest(deck="shoe-8", hand_count=256, close=True)  # 300 KB
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        grpc.insecure_channel(running.target, options=[("grpc.http2.bdp_probe", 0)]) as channel,
    ):
        started = time.monotonic()
        hands = dealer_pb2_grpc.DealerServiceStub(channel).DealHands(request, timeout=30)
        hold_silent(4.0)  # the reader has not started: the batch waits, and the deadline passes
        received = 0
        with pytest.raises(grpc.RpcError) as cut:
            for response in hands:
                received += len(response.hands)
        assert time.monotonic() - started < 15
        assert cut.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
        assert "wrote nothing" in cut.value.details()  # type: ignore[attr-defined]
        assert error_info(cut.value)[1].reason == "DEADLINE_EXCEEDED"
        assert received == 256  # the batch was written (waiting) when the deadline passed


def _read_keeping_up(client: DealerClient, count: int) -> int:
    """The hands of a DealHands of ``count`` (closed), read with a pause of 30 ms every 200: a
    reader that keeps up, slowly (20,000 hands: 3 s or more)."""
    received = 0
    for received, _ in enumerate(client.deal_hands(hand_count=count, close=True), 1):
        if received % 200 == 0:
            pace(0.03)
    return received


def test_a_stream_that_keeps_writing_runs_past_the_default_deadline(tmp_path: Path) -> None:
    """A bulk DealHands shares the dealer with other tenants and takes longer than the default
    deadline; it is not cut while its responses keep going out (it was, at 30 s, in half the
    benchmark's bulk readers' calls). Each response here comes within 0.1 s, the whole stream
    takes more than two deadlines. (With a 1 s deadline a slow run of the whole suite's serial
    phase went 1 s without a write: the deadline is 2 s, and the reader's pauses alone take 4.5 s,
    so the stream outlasts two deadlines on any machine; a stream cut at one ends at 2 s.)"""
    count = 30_000
    config = {"default_deadline": 2.0, "max_open_hands": 0, "rate_limit": 0}
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        DealerClient(running.target, retries=0, options=[("grpc.http2.bdp_probe", 0)]) as c,
    ):
        started = time.monotonic()
        assert _read_keeping_up(c, count) == count
        assert time.monotonic() - started > 2 * config["default_deadline"]


def test_a_stream_that_keeps_writing_is_not_cut_by_its_connections_age(tmp_path: Path) -> None:
    """A connection past max_connection_age gets GOAWAY, then default_deadline of grace for its
    calls to finish, then it is closed. That grace was enough while the default deadline bounded
    a whole stream; a DealHands that keeps moving may now run past it, and the close then ends it
    UNAVAILABLE "max connection age", with no ErrorInfo: an honest client looks broken (docs/
    security.md: "An ordinary gRPC client does not notice the idle and age bounds"). With the
    default 1 h age and 30 s deadline, a bulk client's stream that takes over 30 s is cut so
    about once an hour per connection. The stream reads for 4.5 s or more (its pauses alone),
    past the age and the old grace (4 s); with a 1 s deadline, two busy cores made it go 1 s
    without a write with or without the heap trims (3 of 4 runs), so the deadline is 3 s."""
    count = 30_000
    config = {"default_deadline": 3.0, "max_open_hands": 0, "rate_limit": 0, "max_connection_age": 1.0}
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        DealerClient(running.target, retries=0, options=[("grpc.http2.bdp_probe", 0)]) as c,
    ):
        assert _read_keeping_up(c, count) == count


def test_a_stream_that_trickles_is_cut_after_its_runs_in_all(tmp_path: Path) -> None:
    """A reader that keeps taking responses, slowly, inside the default deadline keeps its stream
    going; STREAM_RUNS default deadlines end it anyway, with its own message, not at its
    connection's age (1 h) by a close that says nothing."""
    config = {"default_deadline": 1.0, "max_open_hands": 0, "rate_limit": 0}
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        DealerClient(running.target, retries=0, options=[("grpc.http2.bdp_probe", 0)]) as c,
    ):
        started = time.monotonic()
        received = 0
        with pytest.raises(DeadlineExceeded) as cut:
            for received, _ in enumerate(c.deal_hands(hand_count=40_000, close=True), 1):
                if received % 256 == 0:
                    # A pause of 0.1 s each 256 responses (15.6 s of them, past the 10 s in all),
                    # under a 1 s deadline: with 0.3 s, and with 0.6 s, two busy cores made the
                    # dealer go that long without a write (its next chunk is a transaction).
                    pace(0.1)
        took = time.monotonic() - started
        assert cut.value.reason == "DEADLINE_EXCEEDED"
        assert "in all" in str(cut.value)
        assert STREAM_RUNS * 1.0 - 0.1 < took < STREAM_RUNS * 1.0 + scaled(2.0)
        assert received < 40_000


def test_default_deadline_ends_a_unary_call_stalled_on_storage(tmp_path: Path) -> None:
    config = {"default_deadline": 0.3, "rate_limit": 0}
    with RunningDealer(tmp_path / "d", **config) as running, DealerClient(running.target, retries=0) as c:
        c.open_hand()  # the database exists
        blocker = sqlite3.connect(tmp_path / "d" / "fairdeck.db", isolation_level=None, timeout=10)
        blocker.execute("BEGIN IMMEDIATE")  # holds the write lock: the dealer's commit waits
        try:
            started = time.monotonic()
            with pytest.raises(DeadlineExceeded) as cut:
                c.deal_new_hand(client_seeds=["alice"])
            assert 0.25 < time.monotonic() - started < 0.3 + scaled(2.7)
            assert cut.value.reason == "DEADLINE_EXCEEDED"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        # The write the call had handed over lands after all: whole, never acknowledged.
        assert _settled(running) == (2, 2)
        assert c.open_hand().commit_receipt.index == 2
