"""Every SDK call takes ``timeout=`` (seconds for that call, over the client's default) and
``request_id=`` (sent as ``x-request-id``, which the dealer puts on the call's log lines)
(regression: neither existed, so one slow call could not get a shorter deadline, nor a call be
found in the dealer's log). Against a real dealer in this process, whose access lines are
caught as the dealer logs them."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from fairdeck.client import AsyncAuditClient, AsyncDealerClient, AuditClient, DealerClient
from fairdeck.client.calls import REQUEST_ID_KEY
from fairdeck.client.exceptions import DeadlineExceeded, InvalidArgument
from fairdeck.v1 import audit_pb2, audit_pb2_grpc
from fairdeck_server.observe import logging_setup
from fairdeck_server.observe.logging_setup import CallFilter
from tests.support.dealers import RunningDealer
from tests.support.waits import hold_silent

Dealer = tuple[str, str, Path]
"""A running dealer's target, its log's verifier key and its data directory."""


@pytest.fixture(scope="module")
def served(unlimited_dealer: RunningDealer) -> Dealer:
    data = unlimited_dealer.data_dir
    target = unlimited_dealer.target
    key = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "key", "--data", str(data)],
        capture_output=True,
        text=True,
        check=True,
    )
    return target, key.stdout.strip(), data


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    """(request id, method, code) of every access line so far."""
    return [
        (r.request_id, r.method.rsplit("/", 1)[1], r.code)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "fairdeck.access"
    ]


def test_the_sdk_sends_the_request_id_under_the_dealers_key() -> None:
    assert REQUEST_ID_KEY == logging_setup.REQUEST_ID_KEY


@contextmanager
def storage_held(data: Path, release_after: float | None = None) -> Iterator[None]:
    """The dealer's database write-locked by another connection, as a long transaction would
    hold it: every call that writes waits for it (the dealer's busy timeout is 5 s). With
    ``release_after``, the lock is let go that many seconds from now."""
    blocker = sqlite3.connect(data / "fairdeck.db", isolation_level=None, timeout=10, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    once = threading.Lock()
    released = False

    def release() -> None:
        nonlocal released
        with once:
            if not released:
                released = True
                blocker.execute("ROLLBACK")

    timer = threading.Timer(release_after, release) if release_after is not None else None
    if timer is not None:
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.join()
        release()
        blocker.close()


def test_a_short_timeout_raises_deadline_exceeded(served: Dealer) -> None:
    target, _, data = served
    with DealerClient(target) as c:
        with storage_held(data):
            with pytest.raises(DeadlineExceeded) as late:
                c.open_hand(timeout=0.3)
            assert late.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
            with pytest.raises(DeadlineExceeded):
                list(c.deal_hands("short", 3, timeout=0.3))  # a stream's deadline: this call's only
        assert c.open_hand().hand_id  # the client's default (10 s) was never in the way


def test_a_call_timeout_overrides_the_clients_default(served: Dealer) -> None:
    target, _, data = served
    with DealerClient(target, timeout=0.3) as hasty:
        with storage_held(data), pytest.raises(DeadlineExceeded):
            hasty.open_hand()  # the client's default applies
        with storage_held(data, release_after=1.0):
            assert hasty.open_hand(timeout=10).hand_id  # waited out the lock: past 0.3 s
        with storage_held(data, release_after=1.0):
            assert hasty.deal_new_hand(timeout=None).cards  # None: no deadline at all


def test_the_asyncio_client_takes_a_timeout_per_call(served: Dealer) -> None:
    target, _, data = served

    async def run() -> None:
        async with AsyncDealerClient(target, timeout=0.3) as c:
            # The hand to close is not under test: its call (the channel's connect, a write
            # and an fsync) may take past the 0.3 s default on a loaded machine.
            hand = await c.open_hand(timeout=10)
            with storage_held(data):
                with pytest.raises(DeadlineExceeded):
                    await c.close_hand(hand.hand_id)
                with pytest.raises(DeadlineExceeded):
                    await c.open_hand(timeout=0.2)
                with pytest.raises(DeadlineExceeded):
                    [h async for h in c.deal_hands("short", 2, timeout=0.3)]
            with storage_held(data, release_after=1.0):
                assert (await c.close_hand(hand.hand_id, timeout=10)).transcript is not None

    asyncio.run(run())


class SlowLog(audit_pb2_grpc.AuditServiceServicer):
    """A stand-in AuditService whose ListEntries answers one entry after ``delay`` seconds: a
    real dealer reads its log without waiting for writers, so it cannot show an audit deadline."""

    delay = 1.0

    def ListEntries(self, request: audit_pb2.ListEntriesRequest, context: Any) -> Any:
        hold_silent(self.delay)  # a slow server
        page = audit_pb2.ListEntriesResponse()
        page.entries.add(index=request.start_index, data=b"entry")
        return page


@pytest.fixture(scope="module")
def slow_log() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    audit_pb2_grpc.add_AuditServiceServicer_to_server(SlowLog(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def test_the_audit_clients_take_a_timeout_per_call(slow_log: str, served: Dealer) -> None:
    _, vkey, _ = served
    with AuditClient(slow_log, verifier=vkey, timeout=0.2) as log:
        with pytest.raises(DeadlineExceeded):
            list(log.entries())
        assert list(log.entries(timeout=10)) == [(0, b"entry")]
    with AuditClient(slow_log, verifier=vkey) as log, pytest.raises(DeadlineExceeded):
        list(log.entries(timeout=0.2))

    async def run() -> None:
        async with AsyncAuditClient(slow_log, verifier=vkey, timeout=0.2) as log:
            with pytest.raises(DeadlineExceeded):
                [e async for e in log.entries()]
            assert [e async for e in log.entries(timeout=10)] == [(0, b"entry")]

    asyncio.run(run())


def test_a_bad_timeout_is_refused_before_any_call(served: Dealer) -> None:
    target, _, _ = served
    with DealerClient(target) as c, pytest.raises(TypeError, match="timeout"):
        c.open_hand(timeout="10")  # type: ignore[arg-type]


def test_the_request_id_is_on_the_dealers_access_line(
    served: Dealer, caplog: pytest.LogCaptureFixture
) -> None:
    target, vkey, _ = served
    caplog.handler.addFilter(CallFilter())
    caplog.set_level(logging.INFO, logger="fairdeck.access")
    with DealerClient(target) as c:
        hand = c.open_hand(request_id="sdk-open-1")  # the open's idempotency key is its log id too
        c.shuffle(hand.hand_id, [b"s"], request_id="sdk-shuffle-1")
        c.draw(hand.hand_id, 2, expected_position=0, request_id="sdk-draw-1")
        c.get(hand.hand_id, request_id="sdk-get-1")
        c.close_hand(hand.hand_id, request_id="sdk-close-1")
        dealt = c.deal_new_hand(request_id="sdk-deal-new-1")
        list(c.deal_hands("short", 2, request_id="sdk-batch-1"))
        c.get(hand.hand_id)  # no id given: the dealer makes one up
    with AuditClient(target, verifier=vkey) as log:
        log.checkpoint(request_id="sdk-checkpoint-1")
        log.hand_proof(hand.hand_id, request_id="sdk-proof-1")
    lines = logged(caplog)
    assert lines[:7] == [
        ("sdk-open-1", "OpenHand", "OK"),
        ("sdk-shuffle-1", "ShuffleHand", "OK"),
        ("sdk-draw-1", "DrawCards", "OK"),
        ("sdk-get-1", "GetHand", "OK"),
        ("sdk-close-1", "CloseHand", "OK"),
        ("sdk-deal-new-1", "DealNewHand", "OK"),
        ("sdk-batch-1", "DealHands", "OK"),
    ]
    assert lines[7][0] not in {line[0] for line in lines[:7]} and lines[7][1] == "GetHand"
    assert lines[8] == ("sdk-checkpoint-1", "GetCheckpoint", "OK")
    # GetPublicKey: the rotation statements a proof carries to the checkpoint's key (format 3).
    assert [line[1] for line in lines[9:]] == [
        "GetHand",
        "GetInclusionProof",
        "GetInclusionProof",
        "GetPublicKey",
    ]
    assert {line[0] for line in lines[9:]} == {"sdk-proof-1"}  # one id for every call of the proof
    assert dealt.hand.hand_id


def test_an_open_without_a_request_id_logs_the_key_the_sdk_made(
    served: Dealer, caplog: pytest.LogCaptureFixture
) -> None:
    target, _, _ = served
    caplog.handler.addFilter(CallFilter())
    caplog.set_level(logging.INFO, logger="fairdeck.access")
    with DealerClient(target) as c:
        c.open_hand()
        c.open_hand()
    first, second = logged(caplog)
    assert first[1:] == second[1:] == ("OpenHand", "OK")
    assert first[0] != second[0]


def test_the_asyncio_client_sends_the_request_id(served: Dealer, caplog: pytest.LogCaptureFixture) -> None:
    target, _, _ = served
    caplog.handler.addFilter(CallFilter())
    caplog.set_level(logging.INFO, logger="fairdeck.access")

    async def run() -> None:
        async with AsyncDealerClient(target) as c:
            hand = await c.open_hand(request_id="aio-open-1")
            await c.close_hand(hand.hand_id, request_id="aio-close-1")
            [h async for h in c.deal_hands("short", 1, request_id="aio-batch-1")]

    asyncio.run(run())
    assert logged(caplog) == [
        ("aio-open-1", "OpenHand", "OK"),
        ("aio-close-1", "CloseHand", "OK"),
        ("aio-batch-1", "DealHands", "OK"),
    ]


@pytest.mark.parametrize("bad", ["", "has space", "new\nline", "x" * 129, "é"])
def test_a_request_id_the_dealer_would_not_log_is_refused_before_any_call(served: Dealer, bad: str) -> None:
    target, _, _ = served
    with DealerClient(target) as c, pytest.raises(ValueError, match="request_id"):
        c.get("some-hand", request_id=bad)


def test_a_calls_request_id_replaces_the_clients_own(
    served: Dealer, caplog: pytest.LogCaptureFixture
) -> None:
    """A client may send one id with every call (``metadata``, docs/operations.md); a call's
    ``request_id=`` replaces it for that call, and an open's made-up key never does."""
    target, _, _ = served
    caplog.handler.addFilter(CallFilter())
    caplog.set_level(logging.INFO, logger="fairdeck.access")
    with DealerClient(target, metadata=[("x-request-id", "game-7f3a")]) as c:
        hand = c.open_hand()
        c.get(hand.hand_id, request_id="game-7f3a-get")
        c.open_hand(request_id="game-7f3a-open")
        c.close_hand(hand.hand_id)
    assert [line[0] for line in logged(caplog)] == [
        "game-7f3a",
        "game-7f3a-get",
        "game-7f3a-open",
        "game-7f3a",
    ]


def test_an_opens_bad_request_id_is_still_the_dealers_to_refuse(served: Dealer) -> None:
    """An open's request id is its idempotency key, checked by the dealer (the error contract:
    INVALID_REQUEST_ID naming the field); the SDK does not turn it into a ValueError."""
    target, _, _ = served
    with DealerClient(target) as c:
        for open_with in (c.open_hand, c.deal_new_hand):
            with pytest.raises(InvalidArgument) as e:
                open_with("standard", request_id="has space")
            assert (e.value.reason, e.value.field) == ("INVALID_REQUEST_ID", "request_id")
