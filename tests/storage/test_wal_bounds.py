"""The WAL stays bounded and the wal-index stays the dealer's, whoever checkpoints it: while one
writer never stops writing, and while two (``serve --processes 2``) take turns. A design that moves
checkpoints off the COMMIT (a thread of their own, 2026-11-28: bench/README.md, section 13, fifth
session) grew the WAL without end in each case until the writer caught up under the writers' lock,
and dropped the dealer's POSIX locks on the -shm by opening and closing it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.engines import new_hand
from tests.support.waits import outlast_async

MIB = 1024 * 1024
SEALED = 2048  # bytes per hand's sealed seed: WAL pages come fast
HANDS = 50_000  # ~100 MiB through the WAL, written as fast as this machine can
WAL_BOUND = 40 * MIB  # what the WAL stays under (unbounded: all of it)


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


def test_the_wal_stays_bounded_while_writing_on(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> int:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            return await write_busily(storage, path, HANDS)
        finally:
            await storage.close()

    largest = asyncio.run(main())
    assert largest < WAL_BOUND, f"the WAL grew to {largest / MIB:.1f} MiB while ~100 MiB were written"


def test_the_wal_stays_bounded_with_two_processes_writing_on(tmp_path: Path) -> None:
    """``serve --processes 2``: two writers taking turns with the writers' lock, both never idle."""
    path = tmp_path / "fairdeck.db"
    lock = tmp_path / "writer.lock"

    async def main() -> int:
        first = SqliteStorage(path, writer_lock=lock)
        await first.start()
        second = SqliteStorage(path, writer_lock=lock)
        await second.start()
        try:
            sizes = await asyncio.gather(
                write_busily(first, path, HANDS // 2, "a"), write_busily(second, path, HANDS // 2, "b")
            )
            return max(sizes)
        finally:
            await first.close()
            await second.close()

    largest = asyncio.run(main())
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


def test_the_dealer_keeps_its_locks_on_the_wal_index(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it
    (https://sqlite.org/howtocorrupt.html, 2.2): code of ours that opens and closes the -shm (to
    read its header, say) frees the dead-man lock, and the next process to open the database (an
    audit, a backup, another worker) truncates and rebuilds the wal-index under the live dealer."""
    path = tmp_path / "fairdeck.db"

    async def main() -> str:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            await storage.create_hands([new_hand(i) for i in range(10)])
            # A window in which any thread of the dealer's has its turn (and must not drop the lock).
            await outlast_async(0.3)
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
