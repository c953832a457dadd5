"""SQLite's writer does not make a single hand wait behind other callers' bulk chunks.

The abuse benchmark's attack (b): one tenant's DealHands streams queued chunk after chunk of
256 hands, and another tenant's DealNewHand, queued behind all of them in one transaction,
waited over a second. Now each transaction takes every ordinary operation queued and at most
one bulk one (storage/sqlite/writer.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from fairdeck_server.storage.base import HandRecord
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.storage.kit import new_hand, records


def test_a_single_hand_is_committed_ahead_of_bulk_chunks_queued_before_it(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[list[list[HandRecord]], HandRecord]:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            await storage.create_hands([new_hand("warm")])  # the database and its tables exist
            blocker = sqlite3.connect(path, isolation_level=None, timeout=10)
            blocker.execute("BEGIN IMMEDIATE")  # the writer's next transaction waits for this lock
            try:
                chunks = [
                    asyncio.ensure_future(storage.create_hands([new_hand(f"c{k}.{i}") for i in range(50)]))
                    for k in range(5)
                ]
                await asyncio.sleep(0.3)  # the writer has taken the first chunk and waits on the lock
                single = asyncio.ensure_future(storage.create_hands([new_hand("single")]))
                await asyncio.sleep(0.1)  # queued behind the other four chunks
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            stored = [records(c) for c in await asyncio.gather(*chunks)]
            (alone,) = records(await single)
            return stored, alone
        finally:
            await storage.close()

    chunks, single = asyncio.run(main())
    # First come, first served would have put it after all 250 hands of the chunks.
    assert single.commit_index < min(r.commit_index for r in chunks[2])
    # Each stream's chunks still land in the order they were sent.
    firsts = [chunk[0].commit_index for chunk in chunks]
    assert firsts == sorted(firsts)
