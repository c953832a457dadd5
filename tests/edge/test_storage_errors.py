"""Storage failures reach clients as UNAVAILABLE STORAGE_UNAVAILABLE, logged in one
line without a traceback; bugs of our own stay INTERNAL.

Real dealers on real SQLite files. The database fails for real: a second
connection renames a table the dealer uses (sqlite3.OperationalError raised
inside an operation's savepoint), or holds the write lock (SQLITE_BUSY).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.v1 import dealer_pb2, dealer_pb2_grpc
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.dealers import RunningDealer
from tests.support.fixtures import DealerFactory
from tests.support.ops import sample, scrape_until


@pytest.fixture
def running(tmp_path: Path, dealer_factory: DealerFactory) -> RunningDealer:
    return dealer_factory(tmp_path / "d", metrics_listen="127.0.0.1:0")


def test_a_storage_error_inside_an_operation_is_storage_unavailable_not_internal(
    running: RunningDealer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with DealerClient(running.target, timeout=20) as c:
        hand = c.open_hand()
        c.shuffle(hand.hand_id)
        # The table the dealer's hands live in is gone: sqlite3.OperationalError ("no such
        # table") is raised inside the draw's own savepoint, not by BEGIN or COMMIT.
        db = sqlite3.connect(tmp_path / "d" / "fairdeck.db", isolation_level=None, timeout=10)
        db.execute("ALTER TABLE hands RENAME TO hands_away")
        try:
            with pytest.raises(FairdeckError) as failed:
                c.draw(hand.hand_id, 2)  # DrawCards: not retried by the SDK
        finally:
            db.execute("ALTER TABLE hands_away RENAME TO hands")
            db.close()
        assert (failed.value.code, failed.value.reason) == (
            grpc.StatusCode.UNAVAILABLE,
            "STORAGE_UNAVAILABLE",
        )
        assert "internal" not in str(failed.value).lower()
        # Nothing was recorded: no card was dealt, and the first two come out once the table is back.
        assert c.get(hand.hand_id).dealt_count == 0
        assert c.draw(hand.hand_id, 2).position == 0
        c.close_hand(hand.hand_id).verify(commitment=hand.commitment)
    s = scrape_until(
        running, lambda s: sample(s, "fairdeck_storage_errors_total", operation="update_hand") == 1
    )
    assert sample(s, "fairdeck_storage_errors_total", operation="update_hand") == 1
    records = [r for r in caplog.records if r.name.startswith("fairdeck")]
    assert not any(r.exc_info for r in records)  # one line, no traceback
    (line,) = [r.getMessage() for r in records if "storage operation failed" in r.getMessage()]
    assert line == "storage operation failed, rolled back: OperationalError (SQLITE_ERROR)"
    assert hand.hand_id not in "\n".join(r.getMessage() for r in records if r.levelno >= logging.ERROR)


@pytest.mark.light
def test_a_storage_error_before_the_handler_runs_is_storage_unavailable_not_unknown(
    running: RunningDealer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenHand's open-hands cap counts the tenant's hands in storage before the handler
    runs; a storage failure there used to escape the interceptors: UNKNOWN, and a traceback."""
    caplog.set_level(logging.INFO)
    blocker = sqlite3.connect(tmp_path / "d" / "fairdeck.db", isolation_level=None, timeout=10)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        # A bare stub: no SDK retry policy, so one attempt (one busy timeout) is enough.
        with grpc.insecure_channel(running.target) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            with pytest.raises(grpc.RpcError) as failed:
                stub.OpenHand(dealer_pb2.OpenHandRequest(deck="standard"), timeout=30)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    error: grpc.Call = failed.value  # type: ignore[assignment]
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.reason == "STORAGE_UNAVAILABLE"
    assert not any(r.exc_info for r in caplog.records)
    with DealerClient(running.target, timeout=20) as c:  # and it works again once the lock is gone
        c.open_hand()


def test_a_bug_inside_an_operation_stays_internal(tmp_path: Path) -> None:
    """Only the database's own failures become STORAGE_UNAVAILABLE: our bugs stay visible."""

    async def scenario() -> None:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()

        def buggy(conn: sqlite3.Connection) -> None:
            conn.execute("SELECT ?", (object(),))  # a value SQLite cannot bind: our mistake

        with pytest.raises(sqlite3.ProgrammingError):
            await storage._writer.submit(buggy)
        with pytest.raises(TypeError):
            await storage._writer.submit(lambda conn: len(3))  # type: ignore[arg-type]
        await storage.close()

    asyncio.run(scenario())
