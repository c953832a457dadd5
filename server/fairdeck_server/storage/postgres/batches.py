"""The PostgreSQL writer's batches: group commit and the batch planner. Its statements are in
writer.py, run here in one transaction per batch.

Write operations queue in fair turns (fair.take_turns, as on SQLite); a batch first reads and locks
its hands (hand-id order), then phase 1 decides each operation from what was read, with no I/O
(``_decide``: a refused operation fails alone, a second one on the same hand or request id waits for
the next batch), and one statement appends it all. Futures resolve only after COMMIT; a batch that
fails on a race runs again one operation at a time. The design: docs/scaling.md ("The PostgreSQL
writer").
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from fairdeck_server import fair, refusals
from fairdeck_server.fair import FairQueue, Sharing, take_turns
from fairdeck_server.log_causes import cause
from fairdeck_server.storage.base import (
    Change,
    Created,
    HandBatch,
    HandRecord,
    NewHand,
    WriterStats,
    same_request,
)
from fairdeck_server.storage.postgres.diagnosis import not_recorded, what
from fairdeck_server.storage.postgres.writer import (
    BatchWrites,
    Readable,
    read_and_lock,
    rollback,
    write_alone,
    write_and_commit,
)

log = logging.getLogger(__name__)

MAX_BATCH = 512
"""Operations per group-commit transaction."""
QUANTUM = 32
"""A tenant's turn in a batch, in hands written (as the SQLite writer's: fair.py)."""
BATCH_COST = 128
"""Hands one tenant alone may have written in one transaction, while no other tenant has had work
for SHARED_WINDOW seconds; while others have, one turn (QUANTUM), as on SQLite."""
SHARED_WINDOW = 1.0
RETRIES = 3
"""Times an operation alone is retried after a deadlock, serialization failure or lost race."""


# -- the queued write operations ------------------------------------------------------------------


@dataclass(eq=False)
class Create:
    """Insert ``hands`` with their entries (create_hands); ``fut`` gets the stored records."""

    hands: Sequence[NewHand]
    fut: asyncio.Future[Any]
    whose: str = field(default_factory=fair.current)
    """Whose work it is, for the writer's turns (fair.py)."""

    @property
    def cost(self) -> int:
        return len(self.hands)


@dataclass(eq=False)
class Update:
    """Run ``decide`` on a locked hand and store its Change (update_hand); ``fut`` gets the result."""

    tenant: str
    hand_id: str
    decide: Callable[[HandRecord], tuple[Change, Any]]
    fut: asyncio.Future[Any]
    whose: str = field(default_factory=fair.current)
    cost = 1


@dataclass(eq=False)
class CreateBatch:
    """Insert a batch of hands with their entries (create_batch); ``fut`` gets its first index."""

    batch: HandBatch
    fut: asyncio.Future[Any]
    whose: str = field(default_factory=fair.current)

    @property
    def cost(self) -> int:
        return len(self.batch)


@dataclass(eq=False)
class UpdateMany:
    """Updates of hands of one tenant that take one turn, at their cost, and then join a batch
    as ``Update``s (update_hands: the reaper's voids)."""

    parts: list[Update]
    whose: str = field(default_factory=fair.current)

    @property
    def cost(self) -> int:
        return len(self.parts)


_Op = Create | Update | CreateBatch


@dataclass
class _Batch(BatchWrites):
    """What phase 1 decided: the rows to write (writer.BatchWrites), and how to build each operation's
    result once the indexes are known."""

    results: list[tuple[_Op, Callable[[int], Any]]] = field(default_factory=list)
    """Each operation that succeeded, and its result as a function of the tree size before the batch."""
    failed: list[tuple[_Op, BaseException]] = field(default_factory=list)
    deferred: list[_Op] = field(default_factory=list)


class Writer:
    """One replica's writer: the queue of write operations, and the task that commits them
    in batches on a connection of its own (``pool``, of one). ``stats`` counts what it did."""

    def __init__(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]) -> None:
        self._write_pool = pool
        self._queue: FairQueue[_Op | UpdateMany] = FairQueue(QUANTUM)
        self._sharing = Sharing(SHARED_WINDOW)
        self._wakeup = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.stats = WriterStats(lock_wait_seconds=0.0, hashing_seconds=0.0)

    def start(self) -> None:
        """Start committing, what was queued before first."""
        self._task = asyncio.create_task(self._writer(), name="fairdeck-pg-writer")

    def enqueue(self, op: _Op | UpdateMany) -> None:
        self._queue.push(op.whose, op, op.cost)
        self._sharing.saw(op.whose, time.monotonic())
        self._wakeup.set()

    def fail_queued(self, error: BaseException) -> None:
        """Storage did not start: what was queued meanwhile fails with its reason."""
        queued: list[_Op] = []
        while (op := self._queue.pop()) is not None:
            queued += op.parts if isinstance(op, UpdateMany) else [op]
        _settle([(op, False, error) for op in queued])

    async def close(self) -> None:
        """Stop once what is queued is committed."""
        self._closed = True
        self._wakeup.set()
        if self._task is not None:  # it finishes what is queued first
            await asyncio.gather(self._task, return_exceptions=True)

    async def _writer(self) -> None:
        while True:
            while not self._queue:
                if self._closed:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            # What queued while the previous batch committed, in fair turns: one transaction, one
            # WAL flush.
            now = time.monotonic()
            for whose in self._queue.queued():  # work still queued: its tenant is here now
                self._sharing.saw(whose, now)
            shared = self._sharing.shared(now)  # then one turn each (fair.Sharing)
            turns = take_turns(self._queue, alone=QUANTUM if shared else BATCH_COST, most=MAX_BATCH)
            batch = [p for op in turns for p in (op.parts if isinstance(op, UpdateMany) else [op])]
            try:
                await self._run(batch)
            except Exception as e:  # a bug: fail the batch, keep the writer alive
                log.error("storage writer failed: %s", cause(e))
                _settle([(op, False, refusals.storage_unavailable("storage failed")) for op in batch])

    async def _run(self, batch: list[_Op]) -> None:
        """Commit a batch. After a lost race or a deadlock, a batch runs again one
        operation at a time, and a lone operation is retried a few times."""
        attempt = 0
        while True:
            try:
                plan = await self._commit(batch)
                break
            except _Retry as retry:
                if len(batch) > 1:
                    for op in batch:
                        await self._run([op])
                    return
                attempt += 1
                if not retry.again or attempt > RETRIES:
                    _settle([(batch[0], False, not_recorded())])
                    return
                await asyncio.sleep(0.005 * attempt)
            except _Unavailable as e:
                _settle([(op, False, e.error) for op in batch])
                return
        if plan.deferred:  # first in their tenants' next turns, in their order
            for op in reversed(plan.deferred):
                self._queue.push_front(op.whose, op, op.cost)
            self._wakeup.set()

    async def _commit(self, batch: list[_Op]) -> _Batch:
        """One transaction for the whole batch; resolves futures only after COMMIT.

        Round trips: a batch of plain opens is one statement, so one transaction
        in autocommit mode: one round trip. A batch that must read first (request
        ids, hands to lock) sends ``BEGIN`` with its reads, then its write with
        ``COMMIT``: two. Several statements go as one simple-query string (client-
        side binding), so nothing waits between the write and COMMIT.
        """
        began = time.perf_counter()
        keys, ids = _reads(batch)
        try:
            async with self._write_pool.connection() as conn:
                if not (keys or ids):
                    plan = _decide(batch, {}, {})
                    row = await write_alone(conn, plan)
                else:
                    try:
                        cur = psycopg.AsyncClientCursor(conn)
                        existing, current = await read_and_lock(cur, keys, ids)
                        plan = _decide(batch, existing, current)
                        row = await write_and_commit(cur, plan)
                    except BaseException:
                        await rollback(conn)
                        raise
        except (psycopg.errors.IntegrityError, psycopg.errors.TransactionRollback) as e:
            # Worth running again: a deadlock or serialization failure, or another replica
            # that stored the same request id first (the retry then finds its hand).
            again = (
                not isinstance(e, psycopg.errors.IntegrityError) or e.diag.constraint_name == "hands_request"
            )
            log.warning("storage batch of %d rolled back: %s", len(batch), what(e))
            raise _Retry(again) from None
        except psycopg.Error as e:
            log.error("storage batch of %d failed, rolled back: %s", len(batch), what(e))
            raise _Unavailable(not_recorded()) from None
        base = 0 if row is None else int(row[0])
        stats = self.stats
        stats.batches += 1
        stats.operations += len(batch) - len(plan.deferred)
        stats.appends += len(plan.entries)
        stats.transaction_seconds += time.perf_counter() - began
        if row is not None:
            stats.lock_wait_seconds = (stats.lock_wait_seconds or 0.0) + int(row[1]) / 1e6
            stats.hashing_seconds = (stats.hashing_seconds or 0.0) + int(row[2]) / 1e6
        outcomes: list[tuple[_Op, bool, Any]] = [(op, False, error) for op, error in plan.failed]
        outcomes += [(op, True, build(base)) for op, build in plan.results]
        _settle(outcomes)
        return plan


def _reads(batch: list[_Op]) -> tuple[list[tuple[str, str]], list[str]]:
    """What phase 1 must read: the (tenant, request id) of idempotent opens, the hands to update."""
    keys = {
        (n.record.tenant, n.record.request_id)
        for op in batch
        if isinstance(op, Create)
        for n in op.hands
        if n.record.request_id is not None
    }
    ids = {op.hand_id for op in batch if isinstance(op, Update)}
    return sorted(keys), sorted(ids)


def _decide(
    batch: list[_Op],
    existing: dict[tuple[str, str], Readable],
    current: dict[str, Readable],
) -> _Batch:
    """Phase 1's decisions, from what was read: no I/O. A refused operation fails
    alone; a second one on the same hand or request id waits for the next batch."""
    plan = _Batch()
    claimed: set[tuple[str, str]] = set()
    touched: set[str] = set()
    for op in batch:
        if isinstance(op, CreateBatch):
            first = len(plan.entries)
            plan.entries.extend(op.batch.entries)
            plan.batches.append((op.batch, first))
            plan.results.append((op, functools.partial(operator.add, first)))
        elif isinstance(op, Create):
            _prepare_create(plan, op, existing, claimed)
        elif op.hand_id in touched:
            plan.deferred.append(op)  # decide must see the stored result of the first
        else:
            touched.add(op.hand_id)
            _prepare_update(plan, op, current.get(op.hand_id))
    return plan


def _prepare_create(
    plan: _Batch,
    op: Create,
    existing: dict[tuple[str, str], Readable],
    claimed: set[tuple[str, str]],
) -> None:
    keys = [(n.record.tenant, n.record.request_id) for n in op.hands if n.record.request_id is not None]
    if any(k in claimed for k in keys):
        plan.deferred.append(op)  # the same request id earlier in this batch: wait to see its stored hand
        return
    stored_for: list[HandRecord | None] = []
    for n in op.hands:
        r = n.record
        stored = None if r.request_id is None else existing.get((r.tenant, r.request_id))
        if isinstance(stored, refusals.DealerError):  # the earlier request's row is damaged
            plan.failed.append((op, stored))
            return
        if stored is not None and not same_request(stored, r):
            plan.failed.append((op, refusals.request_id_reused()))
            return
        stored_for.append(stored)
    claimed.update(keys)
    inserts = plan.inserts
    made: list[HandRecord | int] = []  # the stored hand of a retry, or a position in inserts
    for n, stored in zip(op.hands, stored_for, strict=True):
        if stored is not None:
            made.append(stored)
            continue
        commit_pos = plan.append(n.log_entry)
        reveal_pos = None if n.reveal_entry is None else plan.append(n.reveal_entry)
        inserts.append((n.record, commit_pos, reveal_pos))
        made.append(len(inserts) - 1)

    def build(base: int) -> list[Created]:
        result = []
        for m in made:
            if isinstance(m, HandRecord):
                result.append(Created(m, found=True))
                continue
            r, c, v = inserts[m]
            stored = replace(r, commit_index=base + c, reveal_index=None if v is None else base + v)
            result.append(Created(stored))
        return result

    plan.results.append((op, build))


def _prepare_update(plan: _Batch, op: Update, current: Readable | None) -> None:
    if isinstance(current, refusals.DealerError):  # its row is damaged: this operation alone fails
        plan.failed.append((op, current))
        return
    if current is None or current.tenant != op.tenant:
        plan.failed.append((op, refusals.hand_not_found()))
        return
    try:
        change, value = op.decide(current)
    except Exception as e:  # refused (DealerError), or a bug: this operation alone fails
        if not isinstance(e, refusals.DealerError):
            log.error("storage update failed: %s", cause(e))
        plan.failed.append((op, e))
        return
    new = change.record
    pos = None if change.log_entry is None else plan.append(change.log_entry)
    if pos is not None or new != current:
        plan.updates.append((new, pos))

    def build(base: int) -> tuple[HandRecord, Any]:
        return (new if pos is None else replace(new, reveal_index=base + pos)), value

    plan.results.append((op, build))


def _settle(outcomes: list[tuple[_Op, bool, Any]]) -> None:
    for op, ok, value in outcomes:
        if op.fut.done():  # cancelled by its caller: the write still happened (or not), nobody waits
            continue
        if ok:
            op.fut.set_result(value)
        else:
            op.fut.set_exception(value)


class _Retry(Exception):
    """The batch rolled back on a constraint or a deadlock; ``again``: worth retrying alone."""

    def __init__(self, again: bool) -> None:
        super().__init__()
        self.again = again


class _Unavailable(Exception):
    def __init__(self, error: refusals.DealerError) -> None:
        super().__init__(str(error))
        self.error = error
