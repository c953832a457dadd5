"""SQLite reads run on a thread and connection of their own (storage/sqlite/reader.py).

A read no longer waits for the writer: not for a long batch, not for the database's write lock
held by another process. A read sees every write acknowledged before it was asked for, and a
flood of one tenant's reads does not sit in front of another tenant's read. The real engine on a
real file; the writer is held inside a batch by a second connection holding the write lock.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import time
from pathlib import Path

import pytest

from fairdeck.wire import Reason
from fairdeck_server import fair
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.sqlite import SqliteStorage
from fairdeck_server.storage.sqlite.batches import READ_MOST as MOST
from tests.support.engines import new_hand, records, writer_in_batch
from tests.support.speed import scaled


@pytest.mark.serial
def test_a_read_is_answered_while_the_writer_waits_for_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[float, bool]:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            (made,) = records(await storage.create_hands([new_hand(1)]))
            blocker = sqlite3.connect(path, isolation_level=None, timeout=10)
            blocker.execute("BEGIN IMMEDIATE")  # the writer's next batch waits for this lock
            try:
                write = asyncio.ensure_future(storage.create_hands([new_hand(2)]))
                await writer_in_batch(storage)  # the writer is inside its batch, waiting
                began = time.monotonic()
                got = await asyncio.wait_for(storage.get_hand("t", made.hand_id), 3)
                took = time.monotonic() - began
                waiting = not write.done()
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            await write
            assert got is not None and got.commitment == made.commitment
            return took, waiting
        finally:
            await storage.close()

    took, waiting = asyncio.run(main())
    assert waiting, "the write should still have been waiting for the lock"
    assert took < scaled(1.0, under=2.5), took  # the old code's read waited for the lock: 3 s and out


def test_a_read_sees_every_write_acknowledged_before_it(tmp_path: Path) -> None:
    async def main() -> None:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        try:
            for i in range(200):
                (made,) = records(await storage.create_hands([new_hand(i)]))
                got = await storage.get_hand("t", made.hand_id)
                assert got is not None and got.commit_index == made.commit_index, i
                assert await storage.open_hands("t") == i + 1
                assert await storage.entry_index(made.hand_id, False) == made.commit_index
        finally:
            await storage.close()

    asyncio.run(main())


@pytest.mark.serial
def test_one_tenants_flood_of_reads_does_not_sit_in_front_of_anothers_read(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        try:
            (made,) = records(await storage.create_hands([new_hand(1)]))
            order: list[str] = []

            async def read(who: str) -> None:
                await storage.get_hand("t", made.hand_id)
                order.append(who)

            flood = fair.bind("flood")
            reads = [asyncio.ensure_future(read("flood")) for _ in range(2000)]
            fair.unbind(flood)
            one = fair.bind("one")
            reads.append(asyncio.ensure_future(read("one")))  # queued last, in the same turn
            fair.unbind(one)
            await asyncio.gather(*reads)
            return order.index("one"), len(order)
        finally:
            await storage.close()

    position, total = asyncio.run(main())
    assert total == 2001
    assert position <= MOST, f"the other tenant's read came {position}th of {total}"


def test_a_read_failing_while_the_disk_fails_stat_too_leaves_the_reader_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dying disk or mount: a read fails (SQLITE_IOERR) and saying what kind of failure it is
    stats the -wal and -shm files, which fails too (EIO). That OSError escaped the reader's
    error path and ended its thread: the read never got an answer, nor did any read after it
    (each call hung until its deadline, and health heard nothing)."""
    path = tmp_path / "fairdeck.db"
    real_exists = Path.exists

    def exists(self: Path) -> bool:
        if self.name.endswith(("-wal", "-shm")):
            raise OSError(errno.EIO, "Input/output error")
        return real_exists(self)

    def failing_read(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    async def main() -> None:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            (made,) = records(await storage.create_hands([new_hand(1)]))
            monkeypatch.setattr(Path, "exists", exists)
            with pytest.raises(DealerError) as failed:
                await asyncio.wait_for(storage._reader.submit(failing_read), 3)
            assert failed.value.reason == Reason.STORAGE_UNAVAILABLE
            monkeypatch.setattr(Path, "exists", real_exists)
            got = await asyncio.wait_for(storage.get_hand("t", made.hand_id), 3)
            assert got is not None and got.commitment == made.commitment
        finally:
            await storage.close()

    asyncio.run(main())


def test_a_tenants_open_hands_are_counted_without_reading_anothers(tmp_path: Path) -> None:
    """The cap's count reads the tenant's own open hands only, by an index on (tenant) of the open
    ones (PostgreSQL had it; SQLite counted by passing every tenant's open hands, so a tenant at a
    cap of 10,000 made every other tenant's count read 10,000 rows), and a database made before
    that index gets it when it is opened."""
    from fairdeck_server.storage.sqlite.reader import OPEN_HANDS_OF_TENANT

    path = tmp_path / "fairdeck.db"

    async def count_then_reopen(drop: bool) -> int:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            if not drop:
                await storage.create_hands([new_hand(i, tenant="big") for i in range(200)])
                await storage.create_hands([new_hand(1000 + i, tenant="small") for i in range(3)])
            return await storage.open_hands("small")
        finally:
            await storage.close()

    assert asyncio.run(count_then_reopen(drop=False)) == 3
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX hands_open_tenant")  # as a database made before it
    assert asyncio.run(count_then_reopen(drop=True)) == 3
    with sqlite3.connect(path) as conn:
        plan = " ".join(
            str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + OPEN_HANDS_OF_TENANT, ("small",))
        )
    assert "USING INDEX hands_open_tenant (tenant=?)" in plan, plan
