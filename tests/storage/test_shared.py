"""Several processes of one dealer write one SQLite file (``fairdeck serve --processes``).

Each SqliteStorage keeps the log's size and Merkle frontier in memory. With another
writer on the file that memory goes stale, and an append would reuse an index or
hash against the wrong siblings. ``shared=True`` takes the log as it is inside each
write transaction. Two storages on one file stand for two processes here (two
connections, two writer threads: SQLite locks them against each other as it does
processes).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from fairdeck.log import merkle
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.storage.kit import closing, entry, new_hand


def test_two_writers_on_one_file_append_one_consistent_log(tmp_path: Path) -> None:
    path = tmp_path / "fairdeck.db"

    async def main() -> tuple[list[int], tuple[int, bytes], tuple[int, bytes]]:
        a = SqliteStorage(path, shared=True)
        await a.start()
        b = SqliteStorage(path, shared=True)
        await b.start()
        try:
            indexes = []
            for round_ in range(5):
                made = await asyncio.gather(
                    *(a.create_hands([new_hand(f"a{round_}.{i}")]) for i in range(20)),
                    *(b.create_hands([new_hand(f"b{round_}.{i}")]) for i in range(20)),
                    b.create_hands([new_hand(f"bulk{round_}.{i}") for i in range(30)]),
                )
                indexes += [r.commit_index for records in made for r in records]
            # an update appending a reveal, through the other storage than the one that created it
            closed, _ = await b.update_hand("t", "ha0.0", closing(entry("reveal a0.0")))
            assert closed.reveal_index is not None
            indexes.append(closed.reveal_index)
            return indexes, await a.log_head(), await b.log_head()
        finally:
            await a.close()
            await b.close()

    indexes, head_a, head_b = asyncio.run(main())
    assert sorted(indexes) == list(range(5 * 70 + 1))  # every index given once, none skipped
    with sqlite3.connect(path) as conn:
        entries = [bytes(r[0]) for r in conn.execute("SELECT entry FROM log_entries ORDER BY idx")]
    root = merkle.root([merkle.leaf_hash(e) for e in entries])
    assert head_a == head_b == (len(entries), root)  # the stored hashes are the tree of the entries
