"""The SQLite engine's log: stored hashes written from the in-memory frontier
match RFC 9162 roots computed naively, across restarts at every size, and an
operation that fails rolls the frontier back with its rows."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from fairdeck import merkle
from fairdeck_server.storage.base import HandRecord, HandState, NewHand
from fairdeck_server.storage.sqlite import SqliteStorage


def record(i: int) -> HandRecord:
    return HandRecord(
        tenant="t",
        hand_id=f"h{i}",
        request_id=None,
        deck="standard",
        version="fairdeck-v1",
        commitment=bytes(32),
        sealed_seed=b"sealed",
        client_seeds=(),
        state=HandState.OPEN,
        dealt=0,
        created_ms=0,
        commit_index=-1,
    )


def entry(i: int) -> bytes:
    return f"entry {i}".encode()


async def roots_across_restarts(path: Path, batches: list[int]) -> list[tuple[int, bytes, bytes]]:
    """Append batches of hands, restarting the engine between batches; (size, stored root, naive root)."""
    out, n = [], 0
    for size in batches:
        storage = SqliteStorage(path)
        await storage.start()
        try:
            await storage.create_hands([NewHand(record(i), entry(i)) for i in range(n, n + size)])
            n += size
            stored_size, root = await storage.log_head()
            out.append((stored_size, root, merkle.root([merkle.leaf_hash(entry(i)) for i in range(n)])))
        finally:
            await storage.close()
    return out


@pytest.mark.parametrize("batches", [[1] * 20, [3, 5, 8, 13, 1, 1, 64], [255, 2, 257]])
def test_stored_roots_equal_naive_roots_across_restarts(tmp_path: Path, batches: list[int]) -> None:
    for size, stored, naive in asyncio.run(roots_across_restarts(tmp_path / "db", batches)):
        assert stored == naive, f"root differs at size {size}"


def test_a_refused_operation_rolls_back_the_frontier(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, bytes, bytes]:
        storage = SqliteStorage(tmp_path / "db")
        await storage.start()
        try:
            await storage.create_hands([NewHand(record(i), entry(i)) for i in range(5)])
            clash = replace(record(0), request_id=None)  # same hand id: the insert fails after the appends

            with pytest.raises(Exception):
                await storage.create_hands([NewHand(record(5), entry(5)), NewHand(clash, entry(99))])
            await storage.create_hands([NewHand(record(6), entry(6))])
            size, root = await storage.log_head()
            naive = merkle.root([merkle.leaf_hash(entry(i)) for i in (0, 1, 2, 3, 4, 6)])
            return size, root, naive
        finally:
            await storage.close()

    size, root, naive = asyncio.run(scenario())
    assert size == 6
    assert root == naive
