"""Helpers of the storage suite: records and entries to store, running a
scenario against a started engine, and RFC 9162 roots computed naively."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from fairdeck.log import merkle
from fairdeck_server.storage.base import Change, Created, HandRecord, NewHand, Storage, StoredHandState

T = TypeVar("T")


@dataclass(frozen=True)
class Engine:
    """A storage engine on one database: ``open()`` makes a new (unstarted)
    Storage on it, as a restarted server or another replica would."""

    name: str
    open: Callable[[], Storage]
    open_replica: Callable[[], Storage]
    """A Storage as another process writing the same database at the same time opens it
    (a replica on PostgreSQL; a process of ``serve --processes N`` on SQLite)."""


def record(i: int | str, *, tenant: str = "t", request_id: str | None = None, **fields: Any) -> HandRecord:
    base = HandRecord(
        tenant=tenant,
        hand_id=f"h{i}",
        request_id=request_id,
        deck="standard",
        version="fairdeck-v1",
        commitment=bytes(32),
        sealed_seed=b"sealed",
        client_seeds=(),
        state=StoredHandState.OPEN,
        dealt=0,
        created_ms=0,
        commit_index=-1,
    )
    return replace(base, **fields)


def records(created: Sequence[Created]) -> list[HandRecord]:
    """The stored records of what ``create_hands`` returned."""
    return [c.record for c in created]


def entry(i: int | str) -> bytes:
    return f"entry {i}".encode()


def new_hand(i: int | str, **fields: Any) -> NewHand:
    return NewHand(record(i, **fields), entry(i))


def naive_root(entries: Sequence[bytes]) -> bytes:
    return merkle.root([merkle.leaf_hash(e) for e in entries])


def run(engine: Engine, scenario: Callable[[Storage], Awaitable[T]]) -> T:
    """Start a Storage of ``engine``, run ``scenario`` with it, close it."""

    async def main() -> T:
        storage = engine.open()
        await storage.start()
        try:
            return await scenario(storage)
        finally:
            await storage.close()

    return asyncio.run(main())


def closing(entry_bytes: bytes) -> Callable[[HandRecord], tuple[Change, str]]:
    """A decide that closes the hand and appends ``entry_bytes`` (or leaves a closed hand as is)."""

    def decide(r: HandRecord) -> tuple[Change, str]:
        if r.state is StoredHandState.CLOSED:
            return Change(r), "already"
        closed = replace(r, state=StoredHandState.CLOSED, closed_ms=1, server_seed=b"seed")
        return Change(closed, entry_bytes), "closed"

    return decide


def dealing(n: int) -> Callable[[HandRecord], tuple[Change, int]]:
    """A decide that deals ``n`` more cards (no log entry); returns the position before."""

    def decide(r: HandRecord) -> tuple[Change, int]:
        return Change(replace(r, state=StoredHandState.SHUFFLED, dealt=r.dealt + n)), r.dealt

    return decide
