"""Helpers of the storage suite: records and entries to store, running a
scenario against a started engine, and RFC 9162 roots computed naively."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from fairdeck.log import merkle
from fairdeck_server.storage.base import Change, Created, HandRecord, NewHand, Storage, StoredHandState
from tests.support.waits import wait_for_async

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


def _writer_in_batch(storage: Storage) -> bool:
    """Whether the storage's writer is inside a batch (in these tests: waiting for the lock)
    that holds work not answered yet, with nothing handed over to it since it took the batch.
    Not answered: a writer still in the tail of the batch before (its callers answered, the
    test's next calls not yet taken) is not inside the batch the test waits for."""
    writer: Any = getattr(storage, "_writer", None)
    if writer is None:
        raise TypeError(f"no writer to watch in {type(storage).__name__}")
    thread = getattr(writer, "_thread", None)
    if thread is not None:  # SQLite: the writer's thread, in _run_batch, its queue drained
        frame = thread_frame(thread.ident or -1)
        while frame is not None and frame.f_code.co_name != "_run_batch":
            frame = frame.f_back
        return frame is not None and _unanswered(frame.f_locals) and writer._queue.empty()
    coro = writer._task.get_coro()  # PostgreSQL: the writer's task, awaiting its commit
    while coro is not None and hasattr(coro, "cr_code"):
        if coro.cr_code.co_name == "_commit":
            return _unanswered(coro.cr_frame.f_locals)
        coro = coro.cr_await
    return False


def thread_frame(ident: int) -> Any:
    """The frame thread ``ident`` runs now, read with the collector off. CPython 3.11's
    ``sys._current_frames`` holds the runtime's lock of thread states while it makes frame
    objects; a collection run then (a grpc object's finalizer closing a socket, which lets the
    interpreter lock go) waited for the lock a thread that was ending held while it waited for
    that lock of thread states: a worker of a whole run hung in a storage test, where
    pytest-timeout's signal could not reach it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames().get(ident)
    finally:
        if enabled:
            gc.enable()


def _unanswered(local: dict[str, Any]) -> bool:
    """Whether the batch of a writer's frame holds an operation whose caller waits still."""
    return any(not op.fut.done() for op in local.get("batch", ()))


async def writer_in_batch(storage: Storage) -> None:
    """Once the writer has taken what was submitted and is inside its batch (behind a lock)."""
    await wait_for_async("the writer inside its batch", lambda: _writer_in_batch(storage), every=0.01)


async def handed_over(storage: Storage) -> None:
    """Once what this loop submitted is in the SQLite writer's queue (it waits there while the
    writer's batch waits for the lock)."""
    writer: Any = getattr(storage, "_writer", None)
    await wait_for_async("the calls handed to the writer", lambda: not writer._queue.empty(), every=0.01)
