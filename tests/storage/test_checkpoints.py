"""SQLite's WAL is copied into the database off the writer's COMMITs (storage/sqlite/checkpointer.py)
and stays bounded: while the writer never stops writing, and while the background thread is stuck.
Each bound fails without the writer's catch-up (a PASSIVE checkpoint beside a busy writer never
lets the WAL restart), and the first fails on a writer that checkpoints inside its COMMITs."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fairdeck_server.storage.sqlite import SqliteStorage, checkpointer
from tests.storage.kit import new_hand

MIB = 1024 * 1024
SEALED = 2048  # bytes per hand's sealed seed: WAL pages come fast
HANDS = 50_000  # ~100 MiB through the WAL, written as fast as this machine can
WAL_BOUND = 40 * MIB  # what the WAL stays under: a few passes' worth (unbounded: all of it)


class Watched(SqliteStorage):
    """SqliteStorage whose writer connection is kept, to ask it its settings."""

    conn: sqlite3.Connection

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        connect = self._writer.connect

        def kept() -> sqlite3.Connection:
            self.conn = connect()
            return self.conn

        self._writer.connect = kept  # type: ignore[method-assign]


def wal_size(path: Path) -> int:
    try:
        return os.path.getsize(f"{path}-wal")
    except FileNotFoundError:
        return 0


async def write_busily(storage: SqliteStorage, path: Path, hands: int, prefix: str = "") -> int:
    """``hands`` big hands, eight calls in flight at once so the writer's queue never empties;
    the WAL's largest size seen."""
    largest = 0
    sealed = os.urandom(SEALED)
    for start in range(0, hands, 8 * 64):
        calls = [
            storage.create_hands(
                [new_hand(prefix + f"{start}-{k}-{i}", sealed_seed=sealed) for i in range(64)]
            )
            for k in range(8)
        ]
        await asyncio.gather(*calls)
        largest = max(largest, wal_size(path))
    return largest


def test_commits_carry_no_checkpoint_and_the_wal_stays_bounded_while_writing_on(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[int, int, int, int]:
        storage = Watched(path)
        await storage.start()
        try:
            largest = await write_busily(storage, path, HANDS)
            (auto,) = await asyncio.to_thread(
                lambda: storage.conn.execute("PRAGMA wal_autocheckpoint").fetchone()
            )
            marks = storage._writer.checkpoints
            return largest, auto, marks.passes, marks.catch_ups
        finally:
            await storage.close()

    largest, auto, passes, catch_ups = asyncio.run(main())
    assert auto == 0, "the writer's COMMITs checkpoint the WAL (wal_autocheckpoint is on)"
    assert passes > 0 and catch_ups > 0, (passes, catch_ups)
    assert largest < WAL_BOUND, f"the WAL grew to {largest / MIB:.1f} MiB while ~100 MiB were written"


def test_the_wal_stays_bounded_while_the_background_thread_is_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread never passes (a disk that hangs it, a bug): the writer copies the WAL itself
    every FORCE_S, so it still restarts."""
    path = tmp_path / "fairdeck.db"
    monkeypatch.setattr(checkpointer.Checkpointer, "_run", lambda self: self._stop.wait())
    monkeypatch.setattr(checkpointer, "FORCE_S", 0.2)

    async def main() -> tuple[int, int, int]:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            largest = await write_busily(storage, path, HANDS)
            marks = storage._writer.checkpoints
            return largest, marks.passes, marks.catch_ups
        finally:
            await storage.close()

    largest, passes, catch_ups = asyncio.run(main())
    assert passes == 0 and catch_ups > 0, (passes, catch_ups)
    assert largest < WAL_BOUND, f"the WAL grew to {largest / MIB:.1f} MiB with the thread stuck"


def test_the_wal_stays_bounded_with_two_processes_writing_on(tmp_path: Path) -> None:
    """``serve --processes 2``: two writers taking turns with the writers' lock, both never idle.
    A catch-up made after the lock was let go races the other writer's next transaction, which
    then began on a WAL not wholly copied and cannot restart it: the WAL grows without end."""
    path = tmp_path / "fairdeck.db"
    lock = tmp_path / "writer.lock"

    async def main() -> tuple[int, int]:
        first = SqliteStorage(path, writer_lock=lock)
        await first.start()
        second = SqliteStorage(path, writer_lock=lock)
        await second.start()
        try:
            sizes = await asyncio.gather(
                write_busily(first, path, HANDS // 2, "a"), write_busily(second, path, HANDS // 2, "b")
            )
            return max(sizes), first._writer.checkpoints.catch_ups + second._writer.checkpoints.catch_ups
        finally:
            await first.close()
            await second.close()

    largest, catch_ups = asyncio.run(main())
    assert catch_ups > 0
    assert largest < WAL_BOUND, f"the WAL grew to {largest / MIB:.1f} MiB with two writers"


DMS = 128
"""The -shm file's dead-man byte: every process using the wal-index holds a shared POSIX lock on it;
one that finds it unlocked thinks it is the first, and truncates and rebuilds the wal-index."""
TRY_DMS = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "try:\n"
    f"    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, {DMS})\n"
    "except OSError:\n"
    "    print('held')\n"
    "else:\n"
    "    print('free')\n"
)


def test_reading_the_wal_index_keeps_the_dealers_locks_on_it(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it
    (https://sqlite.org/howtocorrupt.html, 2.2). A checkpointer that opens and closes the -shm to
    read its header drops the dealer's locks on the wal-index (read, write, checkpoint, dead-man):
    the next process to open the database (an audit, a backup, another worker) takes the dead-man
    lock and truncates and rebuilds the wal-index under the live dealer's connections."""
    path = tmp_path / "fairdeck.db"

    async def main() -> str:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            await storage.create_hands([new_hand(i) for i in range(10)])
            await asyncio.sleep(checkpointer.INTERVAL * 6)  # the thread has read the -shm's header
            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-c", TRY_DMS, f"{path}-shm"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            return done.stdout.strip() or done.stderr
        finally:
            await storage.close()

    assert asyncio.run(main()) == "held", "another process may rebuild the live dealer's wal-index"
