"""The PostgreSQL writer: group commit, the batch planner and the one statement that appends.

Every append locks the one ``log_head`` row (tree size and frontier) in the transaction that
writes its entries, hashes and hand rows, until COMMIT: one sequence across replicas, gap-free and
never forked. A batch first reads and locks its hands (hand-id order); then one statement
(``fairdeck_append``) takes the log lock last and writes it all. Futures resolve only after
COMMIT; a batch that fails on a race runs again one operation at a time. PostgreSQL's messages
are replaced by their SQLSTATE, so no secret leaks. The design: docs/scaling.md ("The PostgreSQL
writer").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from fairdeck_server import fair, refusals
from fairdeck_server.fair import FairQueue, Sharing, take_turns
from fairdeck_server.log_causes import cause
from fairdeck_server.storage.base import (
    HAND_COLUMNS,
    Change,
    Created,
    HandBatch,
    HandRecord,
    NewHand,
    WriterStats,
    batch_hand_rows,
    encode_seeds,
    hand_record,
    hand_row,
    same_request,
)
from fairdeck_server.storage.postgres.diagnosis import not_recorded, what

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

_UPDATES = (
    "u (hand_id text, client_seeds text, state smallint, dealt integer, closed_ms bigint, server_seed text, "
    "reveal_index bigint, reveal_pos bigint)"
)
_UPDATE_HANDS = (
    "UPDATE hands AS h SET client_seeds = decode(u.client_seeds, 'hex'), state = u.state, "  # noqa: S608
    "dealt = u.dealt, closed_ms = u.closed_ms, server_seed = decode(u.server_seed, 'hex'), "
    f"reveal_index = u.reveal_index FROM jsonb_to_recordset(%s::jsonb -> 'updates') AS {_UPDATES} "
    "WHERE h.hand_id = u.hand_id"
)
_APPEND = (
    "WITH doc AS (SELECT %s::jsonb AS d), "  # noqa: S608 - constants
    "batch AS MATERIALIZED (SELECT array_agg(decode(e.x, 'hex') ORDER BY e.o) AS bytes "
    "FROM doc, jsonb_array_elements_text(doc.d -> 'entries') WITH ORDINALITY AS e (x, o)), "
    # The leaf hashes are computed here, before fairdeck_append takes the lock (which hashes again
    # only an entry whose time it raises to the latest entry's).
    "a AS MATERIALIZED (SELECT f.* FROM batch, fairdeck_append(batch.bytes, ARRAY("
    "SELECT sha256(decode('00', 'hex') || l.x) FROM unnest(batch.bytes) WITH ORDINALITY AS l (x, o) "
    "ORDER BY l.o)) AS f), "
    "entries AS (INSERT INTO log_entries (idx, entry) SELECT a.base + s.o - 1, s.x "
    "FROM a, unnest(a.stored) WITH ORDINALITY AS s (x, o)), "
    f"created AS (INSERT INTO hands ({HAND_COLUMNS}) "
    "SELECT u.hand_id, u.tenant, u.request_id, u.deck, u.version, decode(u.commitment, 'hex'), "
    "decode(u.sealed_seed, 'hex'), decode(u.client_seeds, 'hex'), u.state, u.dealt, u.created_ms, "
    "a.base + u.commit_pos, u.closed_ms, decode(u.server_seed, 'hex'), a.base + u.reveal_pos, "
    "decode(u.request_fp, 'hex') FROM a, doc, jsonb_to_recordset(doc.d -> 'hands') AS u ("
    "hand_id text, tenant text, request_id text, deck text, version text, commitment text, "
    "sealed_seed text, client_seeds text, state smallint, dealt integer, created_ms bigint, "
    "commit_pos bigint, closed_ms bigint, server_seed text, reveal_pos bigint, request_fp text)), "
    "changed AS (UPDATE hands AS h SET client_seeds = decode(u.client_seeds, 'hex'), state = u.state, "
    "dealt = u.dealt, closed_ms = u.closed_ms, server_seed = decode(u.server_seed, 'hex'), "
    "reveal_index = COALESCE(a.base + u.reveal_pos, u.reveal_index) "
    f"FROM a, doc, jsonb_to_recordset(doc.d -> 'updates') AS {_UPDATES} WHERE h.hand_id = u.hand_id) "
    "SELECT base, waited_us, hashing_us FROM a"
)
"""A batch's whole write in one statement: the append (log lock, hashes, head),
then the entries and hand rows at the indexes it gave out. Nothing waits
between it and COMMIT, so the lock is held only while the server works.
The batch travels as one JSON document (bytes in hex): psycopg adapts a
Python list to an array element by element, which cost about 37 us per
hand, against 3 us for ``json.dumps``. It is read as jsonb, parsed once
before the lock is taken (plain json is parsed again by every ``->``, which
doubled the statement's time under the lock)."""
_BY_REQUEST = (
    f"SELECT {HAND_COLUMNS} FROM hands WHERE request_id IS NOT NULL AND (tenant, request_id) IN "  # noqa: S608
    "(SELECT * FROM unnest(%s::text[], %s::text[]))"
)
_LOCK_HANDS = f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = ANY(%s::text[]) ORDER BY hand_id FOR UPDATE"  # noqa: S608

Readable = HandRecord | refusals.DealerError
"""A stored hand as phase 1 read it: its record, or the HAND_UNREADABLE refusal of a damaged row."""

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
class _Batch:
    """What phase 1 decided: entries to append (positions are offsets from the
    tree size the log lock will show), rows to write, and how to build each
    operation's result once the indexes are known."""

    entries: list[bytes] = field(default_factory=list)
    inserts: list[tuple[HandRecord, int, int | None]] = field(default_factory=list)
    """(record, commit entry position, reveal entry position)."""
    updates: list[tuple[HandRecord, int | None]] = field(default_factory=list)
    """(new record, reveal entry position)."""
    batches: list[tuple[HandBatch, int]] = field(default_factory=list)
    """(batch of hands, position of its first entry)."""
    results: list[tuple[_Op, Callable[[int], Any]]] = field(default_factory=list)
    """Each operation that succeeded, and its result as a function of the tree size before the batch."""
    failed: list[tuple[_Op, BaseException]] = field(default_factory=list)
    deferred: list[_Op] = field(default_factory=list)

    def append(self, entry: bytes) -> int:
        self.entries.append(entry)
        return len(self.entries) - 1


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
            shared = self._sharing.shared(time.monotonic())  # then one turn each (fair.Sharing)
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
                    row = await _write_alone(conn, plan)
                else:
                    try:
                        cur = psycopg.AsyncClientCursor(conn)
                        existing, current = await _read_and_lock(cur, keys, ids)
                        plan = _decide(batch, existing, current)
                        row = await _write_and_commit(cur, plan)
                    except BaseException:
                        await _rollback(conn)
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


async def _read_and_lock(
    cur: psycopg.AsyncClientCursor[TupleRow], keys: list[tuple[str, str]], ids: list[str]
) -> tuple[dict[tuple[str, str], Readable], dict[str, Readable]]:
    """Phase 1's reads, with BEGIN, in one round trip: stored hands by request id,
    and the hands to update, locked in hand-id order."""
    query, params = "BEGIN", []
    if keys:
        query += "; " + _BY_REQUEST
        params += [[k[0] for k in keys], [k[1] for k in keys]]
    if ids:
        query += "; " + _LOCK_HANDS
        params.append(ids)
    await cur.execute(query, params)
    sets: list[list[TupleRow]] = []
    while cur.nextset():
        sets.append(await cur.fetchall())
    existing: dict[tuple[str, str], Readable] = {}
    if keys:
        for row in sets.pop(0):
            existing[(row[1], row[2] or "")] = _record(row)
    current = {row[0]: _record(row) for row in sets.pop(0)} if ids else {}
    return existing, current


def _record(row: TupleRow) -> Readable:
    """The hand in ``row``, or the HAND_UNREADABLE refusal of a damaged one: that operation alone
    fails (``_prepare_*``), never the batch around it."""
    try:
        return hand_record(row)
    except refusals.DealerError as e:
        return e


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


async def _write_alone(conn: psycopg.AsyncConnection[TupleRow], plan: _Batch) -> TupleRow | None:
    """Phase 2 of a batch that read nothing: the write is the whole transaction (autocommit)."""
    if not plan.entries:
        return None
    cur = await conn.execute(_APPEND, (_append_doc(plan),), prepare=True, binary=True)
    return await cur.fetchone()


async def _write_and_commit(cur: psycopg.AsyncClientCursor[TupleRow], plan: _Batch) -> TupleRow | None:
    """Phase 2 after reads: the write and COMMIT in one string, one round trip."""
    if plan.entries:
        await cur.execute(_APPEND + "; COMMIT", (_append_doc(plan),))
        return await cur.fetchone()
    if plan.updates:
        await cur.execute(_UPDATE_HANDS + "; COMMIT", (_json({"updates": _updates(plan)}),))
    else:
        await cur.execute("COMMIT")
    return None


async def _rollback(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """End a failed transaction (the pool would too, with a warning); a broken connection is left to it."""
    if conn.info.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        with contextlib.suppress(psycopg.Error):
            await conn.execute("ROLLBACK")


def _updates(plan: _Batch) -> list[dict[str, Any]]:
    return [
        {
            "hand_id": r.hand_id,
            "client_seeds": encode_seeds(r.client_seeds).hex(),
            "state": int(r.state),
            "dealt": r.dealt,
            "closed_ms": r.closed_ms,
            "server_seed": _hex(r.server_seed),
            "reveal_index": r.reveal_index,
            "reveal_pos": pos,
        }
        for r, pos in plan.updates
    ]


def _append_doc(plan: _Batch) -> str:
    """The batch as the one JSON document _APPEND reads (bytes in hex): each hand row's values by
    name (HAND_FIELDS, its log indexes as positions in the batch: commit_pos, reveal_pos)."""
    rows = [hand_row(r, commit_pos, reveal_pos) for r, commit_pos, reveal_pos in plan.inserts]
    for b, first in plan.batches:
        rows += batch_hand_rows(b, first)
    hands = [
        {
            "hand_id": h, "tenant": t, "request_id": q, "deck": d, "version": v, "commitment": c.hex(),
            "sealed_seed": s.hex(), "client_seeds": cs.hex(), "state": st, "dealt": n, "created_ms": ms,
            "commit_pos": ci, "closed_ms": cm, "server_seed": None if ss is None else ss.hex(),
            "reveal_pos": ri, "request_fp": None if fp is None else fp.hex(),
        }
        for h, t, q, d, v, c, s, cs, st, n, ms, ci, cm, ss, ri, fp in rows
    ]  # fmt: skip
    return _json({"entries": [e.hex() for e in plan.entries], "hands": hands, "updates": _updates(plan)})


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


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))


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
