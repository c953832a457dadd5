"""The co-dealer's own rules against a hostile dealer and a handed-over directory: what its ledger
file must be before it serves, and what a GetShare may cost it before it is refused."""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest

from fairdeck.wire import Reason
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import make_dealer
from tests.support.codealers import init_codealer
from tests.support.env import clean_env


def serve_refusal(directory: Path) -> subprocess.CompletedProcess[str]:
    """``fairdeck codealer serve`` on ``directory``, expected to refuse (a start is a failure)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "fairdeck.cli",
            "codealer",
            "serve",
            "--dir",
            str(directory),
            "--listen",
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )


@pytest.mark.parametrize("damage", ["emptied", "another_database"])
def test_an_emptied_or_foreign_codealer_db_is_refused_not_given_a_fresh_schema(
    tmp_path: Path, damage: str
) -> None:
    """A ledger emptied by a failed restore or a full disk (0 bytes reads as an empty database), or
    swapped for another SQLite file, used to get the schema created and serve with no memory of
    what it shared: a card could then go to a second seat. It must stop in one line, exit 2."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    ledger = directory / "codealer.db"
    for extra in ("codealer.db-wal", "codealer.db-shm"):
        (directory / extra).unlink(missing_ok=True)
    ledger.unlink()
    if damage == "emptied":
        ledger.write_bytes(b"")
    else:
        with sqlite3.connect(ledger) as db:
            db.execute("CREATE TABLE notes (x TEXT)")
        db.close()
    before = ledger.read_bytes()
    try:
        out = serve_refusal(directory)
    except subprocess.TimeoutExpired:
        pytest.fail("the co-dealer served on a ledger that is not its own")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "codealer.db" in lines[0] and "restore it from backup" in lines[0]
    assert "Traceback" not in out.stderr
    assert ledger.read_bytes() == before  # nothing was written to it


def test_a_huge_share_count_is_refused_before_any_memory_is_spent_on_it(tmp_path: Path) -> None:
    """GetShare's count (uint32) built one list entry per position before the range check: a count
    near 2**32 from any caller of the unauthenticated port took the co-dealer's memory (tens of
    GB). It must be refused SHARE_OUT_OF_ORDER before anything is built from it."""
    dealer = make_dealer(tmp_path)
    row = asyncio.run(dealer.make_hand("t", "short"))
    codealer = dealer.link.codealer  # type: ignore[attr-defined]
    tracemalloc.start()
    try:
        with pytest.raises(DealerError) as e:
            codealer.share(row.hand_id, 0, b"", [], count=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.value.reason == Reason.SHARE_OUT_OF_ORDER
    assert peak < 1_000_000, f"{peak} bytes spent on a refused count"
    assert codealer.ledger.shares(row.hand_id) == {}


def test_the_dealer_keeps_no_per_hand_lock_after_a_hand_or_a_made_up_hand_id(tmp_path: Path) -> None:
    """The dealer kept one asyncio.Lock per co-dealt hand id it was ever asked about, for good: a
    month of hands, or a tenant naming made-up hand ids, grew its memory without bound. Locks
    must go when nobody holds or waits for them, and still keep two draws of a hand apart."""
    dealer = make_dealer(tmp_path)

    async def play() -> list[int]:
        row = await dealer.make_hand("t", "short")
        draws = await asyncio.gather(*(dealer.draw("t", row.hand_id, 1, b"") for _ in range(2)))
        for i in range(3):
            with pytest.raises(DealerError):
                await dealer.draw("t", f"made-up-{i}", 1, b"")
        await dealer.close("t", row.hand_id)
        return sorted(d.position for d in draws)

    assert asyncio.run(play()) == [0, 1]
    assert dealer._locks == {}


@pytest.mark.parametrize("name", ["codealer.key", "secrets.key"])
def test_a_fifo_in_place_of_a_codealer_key_file_is_refused_not_waited_on(tmp_path: Path, name: str) -> None:
    """A FIFO (mode 0600) put where a key file belongs passed the mode check, and reading it
    blocked for a writer: ``serve`` hung with no word. It must stop in one line, exit 2."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    (directory / name).unlink()
    os.mkfifo(directory / name, 0o600)
    try:
        out = serve_refusal(directory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve waited on a FIFO at {name}")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and "not a regular file" in lines[0], lines


def test_asking_whether_a_hand_is_codealt_does_not_block_the_event_loop_behind_a_codealt_write(
    tmp_path: Path,
) -> None:
    """Every DrawCards, CloseHand and GetHand, ordinary hands' too, asks whether the hand is
    co-dealt. That read took the co-dealt store's lock on the event loop, and the lock is held
    through each co-dealt write's fsync (a pool refill, a draw): every ordinary call of the
    dealer stalled behind it. The event loop must keep running while a write holds the lock."""
    from fairdeck_server.edge.codeal_edge import CodealEdge

    dealer = make_dealer(tmp_path)
    edge = CodealEdge(dealer, codeal_default=False)
    held, loop_free = threading.Event(), threading.Event()
    seen: list[bool] = []

    def writer() -> None:
        with dealer.store._lock:  # a co-dealt write in its fsync
            held.set()
            seen.append(loop_free.wait(timeout=5))  # the loop ran on while the lock was held

    thread = threading.Thread(target=writer)
    thread.start()
    assert held.wait(timeout=5)

    async def main() -> bool:
        async def asked() -> bool:
            answer = edge.owns("ordinary-hand")
            return bool(await answer) if inspect.isawaitable(answer) else bool(answer)

        task = asyncio.ensure_future(asked())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        loop_free.set()
        return await task

    try:
        assert asyncio.run(main()) is False
    finally:
        loop_free.set()
        thread.join(timeout=10)
    assert seen == [True]
