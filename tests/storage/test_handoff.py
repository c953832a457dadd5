"""The event loop hands operations to SQLite's writer thread once per turn, not once per
operation: each hand-off can wake the writer, which then fights the loop for
the GIL while the loop is still submitting."""

from __future__ import annotations

import asyncio
import queue
from pathlib import Path
from typing import Any

from fairdeck_server.storage.sqlite import SqliteStorage
from tests.storage.kit import new_hand


class CountingQueue(queue.SimpleQueue):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.puts = 0

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self.puts += 1
        super().put(item, block, timeout)


def test_operations_of_one_turn_reach_the_writer_in_one_hand_off(tmp_path: Path) -> None:
    async def main() -> tuple[int, int, list[int]]:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        counting = storage._writer._queue = CountingQueue()
        await storage.start()
        try:
            before = counting.puts
            made = await asyncio.gather(*(storage.create_hands([new_hand(i)]) for i in range(50)))
            during = counting.puts - before
            batches = storage.stats.batches
            return during, batches, sorted(c.record.commit_index for (c,) in made)
        finally:
            await storage.close()

    puts, batches, indexes = asyncio.run(main())
    assert puts == 1  # was 50
    assert batches == 1  # so one transaction, one fsync
    assert indexes == list(range(50))


def test_operations_submitted_just_before_close_are_still_done(tmp_path: Path) -> None:
    async def main() -> list[Any]:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        calls = [asyncio.ensure_future(storage.create_hands([new_hand(i)])) for i in range(5)]
        await asyncio.sleep(0)  # submitted (this turn's hand-off not made yet) ...
        await storage.close()  # ... when close() comes
        return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)

    outcomes = asyncio.run(main())
    assert [c.record.commit_index for (c,) in outcomes] == list(range(5))
