"""Log lines about failures: the cause (never a secret), once per cause while it recurs, and the
dealer's own background work under no caller's request id. A lock stall on a real dealer is in
tests/faults/test_blame.py."""

from __future__ import annotations

import asyncio
import logging
import sqlite3

import pytest

from fairdeck_server.log_causes import Repeats, cause
from fairdeck_server.observe import logging_setup
from fairdeck_server.observe.storage_health import StorageHealth
from fairdeck_server.refusals import storage_unavailable
from tests.support.waits import wait_for_async


def test_a_cause_says_the_refusal_and_what_it_came_from_but_no_values() -> None:
    try:
        try:
            raise sqlite3.OperationalError("database is locked; seed=5eed5eed")
        except sqlite3.OperationalError as e:
            e.sqlite_errorname = "SQLITE_BUSY"  # type: ignore[attr-defined]
            raise storage_unavailable("the writers' lock is held elsewhere") from e
    except Exception as e:
        said = cause(e)
    assert said == (
        "UNAVAILABLE (STORAGE_UNAVAILABLE): the writers' lock is held elsewhere, "
        "from OperationalError (SQLITE_BUSY)"
    )
    assert "5eed" not in cause(ValueError("seed 5eed5eed")) == "ValueError"
    assert cause(FileNotFoundError(2, "No such file or directory", "/data/x")) == (
        "FileNotFoundError: No such file or directory (/data/x)"
    )


def test_a_recurring_failure_is_logged_once_then_with_its_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    repeats = Repeats(logging.getLogger("t"), every=10, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="t"):
        for _ in range(41):  # four a second for ten seconds
            repeats.log(logging.ERROR, "publishing failed: X")
            now[0] += 0.25
        repeats.log(logging.ERROR, "publishing failed: Y")  # another cause: at once
    assert [r.getMessage() for r in caplog.records] == [
        "publishing failed: X",
        "publishing failed: X (and 39 more times in the last 10 s)",
        "publishing failed: Y",
    ]


def test_the_storage_probe_runs_under_no_callers_request_id() -> None:
    """The probe that a failed call sets off logged its warnings with that call's request_id:
    work of the dealer's own, charged in the log to one client."""
    seen: list[logging_setup.CallContext | None] = []

    async def probe() -> None:
        seen.append(logging_setup.current_call())
        raise OSError(28, "No space left on device")

    async def run() -> None:
        health = StorageHealth(probe, lambda healthy: None, retry_seconds=0.01)
        _, token = logging_setup.begin_call(
            "/fairdeck.v1.DealerService/OpenHand", [("x-request-id", "client-1")]
        )
        try:
            health.failed()
        finally:
            logging_setup.end_call(token)
        await wait_for_async("the failure logged", lambda: seen, every=0.01)
        await health.stop()

    asyncio.run(run())
    assert seen[0] is None
