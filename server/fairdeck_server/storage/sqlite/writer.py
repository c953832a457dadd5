"""The SQLite writer: one thread owns the connection and commits in groups.

Operations queued while a transaction is made durable go into the next (one fsync for the batch),
each in its own savepoint, so a refused request rolls back alone; futures resolve only after
COMMIT. Bulk operations (a DealHands chunk) wait apart. The writer keeps the log's size, Merkle
frontier and latest entry time, so an append reads nothing and no entry's time goes back; with
``writer_lock`` (``serve --processes N``) it takes turns with other processes' writers and takes
in their appends (``_catch_up``). The design: docs/scaling.md ("The SQLite writer").
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from fairdeck.core.encoding import u64
from fairdeck.log import merkle
from fairdeck.log.logentry import MAGIC, TIME_AT, time_of
from fairdeck_server import refusals
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.storage.base import (
    HAND_COLUMNS,
    Created,
    HandRecord,
    NewHand,
    WriterStats,
    _Frontier,
    encode_seeds,
    hand_record,
    same_request,
)
from fairdeck_server.storage.sqlite.schema import explain, kind, open_database

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_BATCH = 512
CLOSE_TIMEOUT_S = 10.0
"""How long ``close`` waits for the writer thread to finish what is queued: SIGTERM always ends."""
ROW_GROUPS = (256, 128, 64, 32, 16, 8, 4, 2, 1)
"""Rows per multi-row INSERT: n rows (n < 512) go in as one statement per set bit of n,
so the few SQL strings stay in sqlite3's statement cache. 256 x 16 hand columns is
4,096 bound values, well under SQLite's 32,766."""


_Op = tuple[
    Callable[[sqlite3.Connection], Any],
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    bool,
    "Sequence[NewHand] | None",
]
"""(operation, the loop awaiting it, its future, whether it is bulk, and for a plain
creation of hands (no request id) the hands, so a batch can write all of them at once)."""


def _insert_sql(table: str, columns: str, width: int, rows: int) -> str:
    one = "(" + ", ".join("?" * width) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([one] * rows)  # noqa: S608 - constants


_INSERTS = {
    (table, rows): _insert_sql(table, columns, width, rows)
    for table, columns, width in (
        ("hands", HAND_COLUMNS, 16),
        ("log_entries", "idx, entry", 2),
        ("log_hashes", "idx, hash", 2),
    )
    for rows in ROW_GROUPS
}
"""The multi-row INSERTs, built once (constants only: every value is bound)."""


def _insert_rows(conn: sqlite3.Connection, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with as few statements (and GIL hand-offs) as ROW_GROUPS allow."""
    done = 0
    for size in ROW_GROUPS:
        while len(rows) - done >= size:
            values = [v for row in rows[done : done + size] for v in row]
            conn.execute(_INSERTS[table, size], values)
            done += size


class SqliteWriter:
    """The thread that owns the database connection, its queue of operations and the log's state."""

    def __init__(self, path: Path, *, create: bool, writer_lock: Path | None) -> None:
        """``create``: make the file and its tables if missing (schema.open_database).

        ``writer_lock``: other processes write this database too (``serve --processes N``).
        Each batch then first takes an exclusive flock on this file, and takes in what the
        others appended. SQLite's own wait for its write lock polls, sleeping up to 100 ms
        between tries; a blocked flock wakes as soon as the lock is free.
        """
        self._path = path
        self._create = create
        self._writer_lock = writer_lock
        self._writer_fd = -1
        self._queue: queue.SimpleQueue[list[_Op] | None] = queue.SimpleQueue()
        self._pending: dict[asyncio.AbstractEventLoop, list[_Op]] = {}
        """Operations submitted in the current turn of each loop, handed to the writer at its end."""
        self._closed = False
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self.log_size = 0
        self.frontier = _Frontier([])
        self.last_stamp = bytes(8)
        """The time of the latest entry appended, as its 8 bytes (big-endian: compared as bytes, as
        numbers): the next one's is never earlier."""
        self._thread = threading.Thread(target=self._run, name="fairdeck-sqlite-writer", daemon=True)
        self.stats = WriterStats()
        """Written by the writer thread only; readers see whole numbers, possibly a batch behind."""
        self.quiet = True
        """Until the dealer serves (``SqliteStorage.serving``), failures are logged at DEBUG: the
        start-up refusal says them once, in one line."""
        self.last_fault: BaseException | None = None
        """The last database error (storage failing, not a refusal): what ``explain`` says."""

    async def start(self) -> None:
        """Open the database on the writer thread; raise what refused it."""
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._startup_error is not None:
            raise self._startup_error

    async def close(self) -> None:
        if self._closed:
            return
        self._flush(asyncio.get_running_loop())  # what this loop submitted before close runs
        self._closed = True
        self._queue.put(None)
        if self._thread.ident is not None:  # never started (the dealer refused to start): nothing to join
            await asyncio.to_thread(self._thread.join, CLOSE_TIMEOUT_S)
            if self._thread.is_alive():  # stuck in SQLite (a lock, a dead disk): do not hang the exit
                log.error(
                    "the storage writer did not finish within %g s; stopping without it (what was "
                    "acknowledged is on disk, what it held is not acknowledged)",
                    CLOSE_TIMEOUT_S,
                )

    def create_many(self, conn: sqlite3.Connection, hands: Sequence[NewHand]) -> list[Created]:
        """Insert hands with their log entries: a few multi-row INSERTs per table, not one per row."""
        rows = Rows()
        out = self.create_rows(conn, hands, rows)
        rows.write(conn)
        return out

    def create_rows(self, conn: sqlite3.Connection, hands: Sequence[NewHand], rows: Rows) -> list[Created]:
        """Give ``hands`` their log indexes and queue their rows in ``rows`` (written by the caller)."""
        out = []
        for new in hands:
            r = new.record
            existing = self._existing(conn, r) if r.request_id is not None else None
            if existing is not None:
                out.append(Created(existing, found=True))
                continue
            index = self.append(new.log_entry, rows)
            reveal_index = None if new.reveal_entry is None else self.append(new.reveal_entry, rows)
            rows.hands.append(
                (
                    r.hand_id,
                    r.tenant,
                    r.request_id,
                    r.deck,
                    r.version,
                    r.commitment,
                    r.sealed_seed,
                    encode_seeds(r.client_seeds),
                    int(r.state),
                    r.dealt,
                    r.created_ms,
                    index,
                    r.closed_ms,
                    r.server_seed,
                    reveal_index,
                    r.request_fingerprint,
                )
            )
            out.append(Created(replace(r, commit_index=index, reveal_index=reveal_index)))
        return out

    def _existing(self, conn: sqlite3.Connection, r: HandRecord) -> HandRecord | None:
        """The hand an earlier request with this request id created, if the request was the same."""
        row = conn.execute(
            f"SELECT {HAND_COLUMNS} FROM hands WHERE tenant = ? AND request_id = ?",  # noqa: S608
            (r.tenant, r.request_id),
        ).fetchone()
        if row is None:
            return None
        existing = hand_record(row)
        if not same_request(existing, r):
            raise refusals.request_id_reused()
        return existing

    def append(self, entry: bytes, rows: Rows) -> int:
        """Give ``entry`` the next index and queue it with its stored hashes.

        The left siblings an append needs are always on the frontier (the
        complete subtrees of the current tree), kept in memory, so an append
        reads nothing from the database.
        """
        index = self.log_size
        frontier = self.frontier
        if entry.startswith(MAGIC) and len(entry) >= TIME_AT.stop:  # times never go backwards
            stamp = entry[TIME_AT]
            if stamp < self.last_stamp:
                entry = entry[: TIME_AT.start] + self.last_stamp + entry[TIME_AT.stop :]
            else:
                self.last_stamp = stamp
        hashes = merkle.stored_hashes_for_append(index, merkle.leaf_hash(entry), frontier.read)
        start = merkle.stored_hash_index(0, index)
        rows.entries.append((index, entry))
        rows.hashes.extend((start + i, h) for i, h in enumerate(hashes))
        frontier.push(start, hashes)
        self.log_size = index + 1
        return index

    def _run(self) -> None:
        try:
            conn = self.connect()
        except StartupRefused as e:  # reported to start(), as it is
            self._startup_error = e
            self._ready.set()
            return
        except BaseException as e:  # reported to start()
            what = f"cannot open database {self._path}: {e}"
            if isinstance(e, sqlite3.Error):
                what = explain(self._path, e)
            self._startup_error = StartupRefused(what)
            self._ready.set()
            return
        if self._writer_lock is not None:
            try:
                self._writer_fd = os.open(self._writer_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as e:  # reported to start(), as one line
                conn.close()
                self._startup_error = StartupRefused(
                    f"cannot open the writers' lock {self._writer_lock}: {e.strerror or e}"
                )
                self._ready.set()
                return
        self._ready.set()
        ordinary: list[_Op] = []
        bulk: collections.deque[_Op] = collections.deque()  # in arrival order: chunks stay in order
        stop = False
        while not (stop and not bulk):
            if not bulk and not stop:
                ops = self._queue.get()  # nothing to do until something arrives
                if ops is None:
                    stop = True
                else:
                    for op in ops:
                        (bulk.append if op[3] else ordinary.append)(op)
            while not stop and len(ordinary) < MAX_BATCH:
                try:
                    ops = self._queue.get_nowait()
                except queue.Empty:
                    break
                if ops is None:
                    stop = True
                    break
                for op in ops:
                    (bulk.append if op[3] else ordinary.append)(op)
            batch, ordinary = ordinary, []
            if bulk:
                batch.append(bulk.popleft())
            if batch:
                self._run_batch(conn, batch)
        conn.close()
        if self._writer_fd >= 0:
            os.close(self._writer_fd)
            self._writer_fd = -1

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Op]) -> None:
        # Plain creations first, written together; the order of operations that were all
        # in flight at once is free, and none of them can depend on another's outcome.
        batch = [op for op in batch if op[4] is not None] + [op for op in batch if op[4] is None]
        outcomes: list[tuple[bool, Any]] = []
        before = self._mark()
        began = time.perf_counter()
        if self._writer_fd >= 0:
            fcntl.flock(self._writer_fd, fcntl.LOCK_EX)  # blocks this thread only; the GIL is released
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._writer_fd >= 0 and self._catch_up(conn):  # others write too: take in theirs
                before = self._mark()
            fused = self._create_together(conn, [op for op in batch if op[4] is not None])
            outcomes.extend((True, records) for records in fused)
            for fn, _, _, _, _ in batch[len(fused) :]:
                mark = self._mark()
                conn.execute("SAVEPOINT op")
                try:
                    outcomes.append((True, fn(conn)))
                    conn.execute("RELEASE op")
                except Exception as e:  # refused, the database failing, or a bug: this op alone rolls back
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    self._restore(mark)
                    outcomes.append((False, self._op_failure(e)))
            conn.execute("COMMIT")  # synchronous=FULL: returns once the WAL is on disk
            stats = self.stats
            stats.batches += 1
            stats.operations += len(batch)
            stats.appends += self.log_size - before[0]
            stats.transaction_seconds += time.perf_counter() - began
        except Exception as e:  # disk full, I/O error, a bug: nothing of the batch is acknowledged
            self._said("storage batch failed, rolled back", e)
            self.last_fault = e
            # A ROLLBACK that fails too (the disk is gone) must not end the writer thread:
            # every later call would then wait forever instead of failing.
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            self._restore(before)
            failure = refusals.storage_unavailable(
                f"storage failed ({kind(self._path, e)}); the request was not recorded"
            )
            outcomes = [(False, failure)] * len(batch)
        finally:
            if self._writer_fd >= 0:
                fcntl.flock(self._writer_fd, fcntl.LOCK_UN)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for (_, loop, fut, _, _), (ok, value) in zip(batch, outcomes, strict=True):
            by_loop.setdefault(loop, []).append((fut, ok, value))
        for loop, items in by_loop.items():  # one wake-up per loop per batch
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_resolve, items)

    def _op_failure(self, e: Exception) -> Exception:
        """What the caller of a failed operation gets: a refusal as it is, a database
        failure as STORAGE_UNAVAILABLE saying what kind (logged in one line, no traceback,
        no request data), anything else (a bug) as it is, for the servicer to answer INTERNAL."""
        if isinstance(e, refusals.DealerError):
            return e
        self._said("storage operation failed, rolled back", e)
        if _is_storage_fault(e):
            self.last_fault = e
            return refusals.storage_unavailable(
                f"storage failed ({kind(self._path, e)}); the request was not recorded"
            )
        return e

    def _said(self, what: str, e: BaseException) -> None:
        """One log line for a failure: the class and SQLite's error name, never a value."""
        log.log(logging.DEBUG if self.quiet else logging.ERROR, "%s: %s", what, _what(e))

    def _catch_up(self, conn: sqlite3.Connection) -> bool:
        """Take in what other processes appended (``serve --processes N``, docs/scaling.md).

        Under BEGIN IMMEDIATE this writer holds the database's one write lock, so the log's size
        cannot move until COMMIT. When another process has appended since this writer's last
        batch, the frontier is read again from the stored hashes (O(log n) rows); otherwise this
        costs one lookup of the largest index.
        """
        size = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM log_entries").fetchone()[0]
        if size == self.log_size:
            return False
        self.log_size = size
        self.frontier = _Frontier.load(size, hash_reader(conn))
        self.last_stamp = max(self.last_stamp, _last_stamp(conn))
        return True

    def _mark(self) -> tuple[int, _Frontier, bytes]:
        """What an append changes, to put back if its transaction rolls back."""
        return self.log_size, self.frontier.copy(), self.last_stamp

    def _restore(self, mark: tuple[int, _Frontier, bytes]) -> None:
        self.log_size, self.frontier, self.last_stamp = mark

    def _create_together(self, conn: sqlite3.Connection, creations: list[_Op]) -> list[list[Created]]:
        """Write the hands of several plain creations with one set of INSERTs, under one
        savepoint; their records, one list per creation. If that fails (it should not:
        nothing in them can be refused), undo it and return [], and the caller runs them
        one by one, each in its own savepoint, so a failure stays with its operation."""
        if not creations:
            return []
        mark = self._mark()
        rows = Rows()
        conn.execute("SAVEPOINT together")
        try:
            out = [self.create_rows(conn, op[4] or (), rows) for op in creations]
            rows.write(conn)
            conn.execute("RELEASE together")
        except Exception:
            conn.execute("ROLLBACK TO together")
            conn.execute("RELEASE together")
            self._restore(mark)
            return []
        return out

    def connect(self) -> sqlite3.Connection:
        """Open the database and load the log's size and frontier from it."""
        conn = open_database(self._path, create=self._create)
        try:
            self.log_size = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM log_entries").fetchone()[0]
            self.frontier = _Frontier.load(self.log_size, hash_reader(conn))
            self.last_stamp = _last_stamp(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    async def submit(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        bulk: bool = False,
        hands: Sequence[NewHand] | None = None,
    ) -> T:
        if self._closed:
            raise refusals.storage_unavailable("storage is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:  # the first of this turn: hand them all over at its end
            pending = self._pending[loop] = []
            loop.call_soon(self._flush, loop)
        pending.append((fn, loop, fut, bulk, hands))
        return await fut

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the operations a loop submitted in one turn to the writer: one hand-off
        (and at most one wake-up of the writer thread) per turn, not one per operation."""
        ops = self._pending.pop(loop, None)
        if not ops:
            return
        if self._closed:  # submitted before close() on another loop, flushed after it
            failure = refusals.storage_unavailable("storage is closed")
            _resolve([(fut, False, failure) for _, _, fut, _, _ in ops])
            return
        self._queue.put(ops)


class Rows:
    """Rows an operation writes, inserted together at its end."""

    __slots__ = ("entries", "hands", "hashes")

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []
        self.hashes: list[tuple[int, bytes]] = []
        self.hands: list[tuple[Any, ...]] = []

    def write(self, conn: sqlite3.Connection) -> None:
        _insert_rows(conn, "log_entries", self.entries)
        _insert_rows(conn, "log_hashes", self.hashes)
        _insert_rows(conn, "hands", self.hands)


def _last_stamp(conn: sqlite3.Connection) -> bytes:
    """The time of the log's last entry, as its 8 bytes (zeros for an empty log)."""
    row = conn.execute("SELECT entry FROM log_entries ORDER BY idx DESC LIMIT 1").fetchone()
    time_ms = None if row is None else time_of(bytes(row[0]))
    return u64(time_ms or 0)


def hash_reader(conn: sqlite3.Connection) -> Callable[[list[int]], list[bytes]]:
    def read(indexes: list[int]) -> list[bytes]:
        marks = ",".join("?" * len(indexes))  # placeholders only; the values are bound
        query = f"SELECT idx, hash FROM log_hashes WHERE idx IN ({marks})"  # noqa: S608
        rows = dict(conn.execute(query, indexes).fetchall())
        return [bytes(rows[i]) for i in indexes]

    return read


STORAGE_FAULTS = (sqlite3.OperationalError, sqlite3.InternalError)
"""Driver errors that mean the database failed (locked, read-only, full, I/O, a table
gone), not our code: with sqlite3.DatabaseError itself (a damaged file) they become
STORAGE_UNAVAILABLE. ProgrammingError, IntegrityError and the like stay bugs (INTERNAL)."""


def _is_storage_fault(e: BaseException) -> bool:
    return isinstance(e, STORAGE_FAULTS) or type(e) is sqlite3.DatabaseError


def _what(e: BaseException) -> str:
    """An exception named without its message: the class and SQLite's error code name."""
    code = getattr(e, "sqlite_errorname", None)
    return type(e).__name__ + (f" ({code})" if code else "")


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in items:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def select_hand(conn: sqlite3.Connection, tenant: str, hand_id: str) -> HandRecord | None:
    row = conn.execute(f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
    if row is None or row[1] != tenant:
        return None
    return hand_record(row)
