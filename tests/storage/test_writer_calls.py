"""SQLite's writer makes few SQLite calls per transaction, whatever the number of hands in it.

Every SQLite call releases the GIL, and winning it back from a busy event loop can take
a whole switch interval (5 ms). With a SAVEPOINT, three executemany and a RELEASE per
DealNewHand, and a GIL hand-off per row of each executemany, the writer spent most of
its time waiting for the GIL (bench/gil_probe.py). Plain creations in one transaction are now
written together, as multi-row INSERTs.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from fairdeck.log import merkle
from fairdeck_server import refusals
from fairdeck_server.storage.base import HandRecord
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.engines import entry, handed_over, new_hand, record, writer_in_batch

HANDS = 40


class TracedStorage(SqliteStorage):
    """SqliteStorage whose writer connection records every statement SQLite runs."""

    statements: list[str]

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        connect = self._writer.connect

        def traced() -> sqlite3.Connection:
            conn = connect()
            # The tests hold the write lock while calls queue behind it: SQLite's busy wait (5 s)
            # must outlast a starved test loop, or the writer gives up the lone call and takes the
            # others alone (seen in a CI dry run: "waited 20 s for the calls handed to the writer").
            conn.execute("PRAGMA busy_timeout = 120000")
            self.statements = []
            conn.set_trace_callback(self.statements.append)
            return conn

        self._writer.connect = traced  # type: ignore[method-assign]


def test_plain_creations_in_one_transaction_take_a_few_statements_not_several_per_hand(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[list[str], list[list[HandRecord]]]:
        storage = TracedStorage(path)
        await storage.start()
        try:
            await storage.create_hands([new_hand("warm")])
            blocker = sqlite3.connect(path, isolation_level=None, timeout=10)
            blocker.execute("BEGIN IMMEDIATE")  # the writer's next transaction waits for this lock
            try:
                first = asyncio.ensure_future(storage.create_hands([new_hand("first")]))
                await writer_in_batch(storage)  # the writer took it alone and waits on the lock
                rest = [asyncio.ensure_future(storage.create_hands([new_hand(i)])) for i in range(HANDS)]
                await handed_over(storage)  # all queued: the next transaction takes them all
                storage.statements.clear()
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            await first
            stored = await asyncio.gather(*rest)
            return list(storage.statements), stored
        finally:
            await storage.close()

    statements, stored = asyncio.run(main())
    # The trace starts inside the lone first hand's transaction (its BEGIN waited on the
    # lock), so one BEGIN is left: the transaction of the 40.
    begins = [i for i, s in enumerate(statements) if s.startswith("BEGIN")]
    assert len(begins) == 1, statements
    second = statements[begins[0] :]
    # BEGIN, a savepoint, 40 log entries + their hashes + 40 hands in a few multi-row
    # INSERTs each (32 + 8 rows), its release, COMMIT. Before: 5 statements per hand,
    # and the rows of each executemany traced one by one (over 200 statements).
    assert len(second) <= 16, second
    indexes = sorted(c.record.commit_index for (c,) in stored)
    assert indexes == list(range(indexes[0], indexes[0] + HANDS))


@pytest.mark.serial
def test_a_failing_creation_among_plain_ones_fails_alone(tmp_path: Path) -> None:
    """When the creations written together fail (here a hand id already stored), they are
    undone and run again one by one: only the bad one fails, and the log has no hole."""
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[list[Any], int, list[bytes]]:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            await storage.create_hands([new_hand("dup")])
            blocker = sqlite3.connect(path, isolation_level=None, timeout=10)
            blocker.execute("BEGIN IMMEDIATE")
            try:
                first = asyncio.ensure_future(storage.create_hands([new_hand("first")]))
                await writer_in_batch(storage)
                calls = [asyncio.ensure_future(storage.create_hands([new_hand(i)])) for i in range(5)]
                calls.insert(2, asyncio.ensure_future(storage.create_hands([new_hand("dup")])))
                await handed_over(storage)
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            await first
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            size = await storage.log_size()
            return outcomes, size, await storage.log_entries(0, size)
        finally:
            await storage.close()

    outcomes, size, entries = asyncio.run(main())
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failed) == 1 and not isinstance(failed[0], refusals.DealerError)  # a bug: INTERNAL
    assert isinstance(outcomes[2], sqlite3.IntegrityError)
    assert size == 2 + 5  # "dup", "first", then the five good ones; no index given to the bad one
    assert entries[:2] == [entry("dup"), entry("first")]
    assert sorted(entries[2:]) == sorted(entry(i) for i in range(5))
    good = [o[0].record for o in outcomes if not isinstance(o, BaseException)]
    assert sorted(r.commit_index for r in good) == list(range(2, 7))
    assert all(r == record(r.hand_id[1:], commit_index=r.commit_index) for r in good)


def test_the_merkle_tree_of_hands_written_together_is_the_tree_of_their_entries(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[int, bytes]:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            await asyncio.gather(*(storage.create_hands([new_hand(i)]) for i in range(300)))
            return await storage.log_head()
        finally:
            await storage.close()

    size, root = asyncio.run(main())
    with sqlite3.connect(path) as conn:
        entries = [bytes(r[0]) for r in conn.execute("SELECT entry FROM log_entries ORDER BY idx")]
    assert size == 300
    assert root == merkle.root([merkle.leaf_hash(e) for e in entries])


@pytest.mark.parametrize("rows", [0, 1, 3, 4, 5, 17, 64, 255, 256, 257, 600])
def test_any_number_of_rows_is_inserted_exactly_once(tmp_path: Path, rows: int) -> None:
    from fairdeck_server.storage.sqlite.writer import _insert_rows

    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    conn.execute("CREATE TABLE log_entries (idx INTEGER PRIMARY KEY, entry BLOB NOT NULL)")
    _insert_rows(conn, "log_entries", [(i, b"e%d" % i) for i in range(rows)])
    assert conn.execute("SELECT idx, entry FROM log_entries ORDER BY idx").fetchall() == [
        (i, b"e%d" % i) for i in range(rows)
    ]
