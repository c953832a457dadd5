"""The threads that run an SQLite engine's operations, in fair batches: the writer (group commit)
and the reader. Their SQL is in writer.py and reader.py; operations reach them through handoff.py.

``SqliteWriter``: one thread owns the writing connection. Operations queued while a transaction is
made durable go into the next in fair turns (fair.take_turns: one turn of each tenant with work
queued, up to BATCH_COST hands for a tenant alone); one fsync covers the batch. No savepoint per
operation: one that refuses has written nothing (REFUSED), any other failure runs the batch again
one operation per transaction. Futures resolve only after COMMIT. With ``writer_lock`` (``serve
--processes N``) it takes turns with other processes' writers (writer_lock.py, waited for at most
LOCK_TIMEOUT) and takes in their appends (writer.LogTail.catch_up). docs/scaling.md has the design.

``SqliteReader``: one thread with a query-only connection of its own, for every read that needs no
state of the writer's. In WAL mode it never waits for the writer nor the writer for it. Reads come
in fair turns, several in one read transaction begun after every one of them was submitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fairdeck_server import refusals
from fairdeck_server.fair import FairQueue, Sharing, take_turns
from fairdeck_server.log_causes import cause
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.storage.base import LogForkError, WriterStats
from fairdeck_server.storage.sqlite.diagnosis import error_name, explain, is_storage_fault, kind
from fairdeck_server.storage.sqlite.handoff import Op, OpQueue, settle
from fairdeck_server.storage.sqlite.schema import open_database
from fairdeck_server.storage.sqlite.writer import LogTail, Mark, Rows
from fairdeck_server.storage.sqlite.writer_lock import WriterLock

log = logging.getLogger(__name__)

MAX_BATCH = 512
"""Operations per transaction, at most."""
CLOSE_TIMEOUT_S = 10.0
"""How long ``close`` waits for the writer thread to finish what is queued: SIGTERM always ends."""
QUANTUM = 32
"""A tenant's turn in a batch, in hands written (an ordinary operation counts one): a DealHands
slice (dealer.SLICE) is one turn."""
BATCH_COST = 128
"""Hands one tenant alone may have written in one transaction, while no other tenant has had work
for SHARED_WINDOW seconds; while others have, one turn (QUANTUM). A batch in progress is what a
newly arrived call waits for: 128 hands made another tenant's median call wait 2x longer behind a
bulk dealer, and 32 cost a bulk dealer alone 38% more CPU per deck (docs/scaling.md, "Sizes")."""
SHARED_WINDOW = 1.0
"""Seconds since another tenant's last work during which batches stay one turn of each."""
OTHER_PROCESSES = "\0other processes"
"""Sharing's key (no tenant's) for the other writers of ``serve --processes N``: a batch that
waited for the writers' lock counts as another tenant's work, for SHARED_WINDOW. Their callers
wait for this process's batch as its own do: a worker whose one tenant is a bulk dealer held the
lock for 128-hand batches while the other worker's tenants waited."""
LOCK_TIMEOUT = 2.0
"""Seconds a batch waits for the writers' lock (``serve --processes N``) before it fails
STORAGE_UNAVAILABLE: a batch holds it for milliseconds, so this long means its holder is stuck."""
STALLED_WAIT = 0.1
"""While the writers' lock is known to be stuck (a batch waited LOCK_TIMEOUT for it in vain), how
long each later batch waits for it: one LOCK_TIMEOUT per queued batch put seconds in front of every
call (a DealNewHand's reaper read, then its write). The helper's flock still wakes the moment the
lock is free, and the next batch takes it."""


REFUSED = (refusals.DealerError, ValueError, LookupError, LogForkError)
"""What an operation raises to refuse, before it writes anything (a DealerError, a token that
exists, a checkpoint that would fork): the batch goes on without it. Anything else (the database
failing, a bug) may come after a write, so the batch is rolled back and run again one by one."""


class SqliteWriter(OpQueue):
    """The thread that owns the database connection, its queue of operations and the log's state."""

    def __init__(
        self, path: Path, *, create: bool, writer_lock: Path | None, writer_lock_fd: int | None = None
    ) -> None:
        """``create``: make the file and its tables if missing (schema.open_database).

        ``writer_lock``: other processes write this database too (``serve --processes N``).
        Each batch then first takes an exclusive flock on this file, and takes in what the
        others appended. SQLite's own wait for its write lock polls, sleeping up to 100 ms
        between tries; a blocked flock wakes as soon as the lock is free. ``writer_lock_fd``: that
        file as the supervisor opened it (storage/sqlite/writer_lock.py: the lock survives its path).
        """
        self._path = path
        self._create = create
        self._lock = (
            None if writer_lock is None else WriterLock(writer_lock, LOCK_TIMEOUT, shared_fd=writer_lock_fd)
        )
        self._stalled_since: float | None = None
        """When the lock was first not had in time, in the stall going on (None: none)."""
        super().__init__()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self.tail = LogTail()
        """The log's size, frontier and latest entry time (writer.LogTail), kept on this thread."""
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
        if self._lock is not None:
            try:
                self._lock.open()
            except OSError as e:  # reported to start(), as one line
                conn.close()
                self._startup_error = StartupRefused(
                    f"cannot open the writers' lock {self._lock.path}: {e.strerror or e}"
                )
                self._ready.set()
                return
        self._ready.set()
        turns: FairQueue[Op] = FairQueue(QUANTUM)
        sharing = Sharing(SHARED_WINDOW)
        stop = False
        while not (stop and not turns):
            if not turns and not stop:
                ops = self._queue.get()  # nothing to do until something arrives
                stop = ops is None
                now = time.monotonic()
                for op in ops or ():
                    turns.push(op.whose, op, op.cost)
                    sharing.saw(op.whose, now)
            while not stop:  # everything else submitted meanwhile joins the fair queue
                try:
                    ops = self._queue.get_nowait()
                except queue.Empty:
                    break
                stop = ops is None
                now = time.monotonic()
                for op in ops or ():
                    turns.push(op.whose, op, op.cost)
                    sharing.saw(op.whose, now)
            if self._lock is not None and self._lock.waited_at is not None:
                # Another process's batch made this one wait: its callers wait for ours too.
                sharing.saw(OTHER_PROCESSES, self._lock.waited_at)
            now = time.monotonic()
            for whose in turns.queued():  # work still queued: its tenant is here now
                sharing.saw(whose, now)
            alone = QUANTUM if sharing.shared(now) else BATCH_COST
            batch = take_turns(turns, alone=alone, most=MAX_BATCH)
            if batch:
                self._run_batch(conn, batch)
        conn.close()
        if self._lock is not None:
            self._lock.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[Op]) -> None:
        """One transaction for ``batch``, resolved only after COMMIT returned. No savepoint per
        operation: one that refuses (REFUSED) has written nothing, and its in-memory appends
        are undone; one that fails otherwise sends the batch to ``_run_alone``."""
        # Plain creations first, written together; the order of operations that were all
        # in flight at once is free, and none of them can depend on another's outcome.
        batch = [op for op in batch if op.rows is not None] + [op for op in batch if op.rows is None]
        before = self.tail.mark()
        began = time.perf_counter()
        lock = self._lock
        if lock is not None and not self._take_lock(lock):
            failure = refusals.storage_unavailable(
                "another process holds the database's writer lock and makes no progress; "
                "the request was not recorded"
            )
            settle(batch, [(False, failure)] * len(batch))
            return
        alone = False
        try:
            conn.execute("BEGIN IMMEDIATE")
            if lock is not None and self.tail.catch_up(conn):  # others write too: take in theirs
                before = self.tail.mark()
            try:
                outcomes = self._create_together(conn, [op for op in batch if op.rows is not None])
            except Exception as e:  # should not happen: nothing in them can be refused
                raise _Again from e
            for op in batch[len(outcomes) :]:
                try:
                    outcomes.append(self._run_op(conn, op))
                except Exception as e:  # it may have written part of itself: undo the batch
                    raise _Again from e
            conn.execute("COMMIT")  # synchronous=FULL: returns once the WAL is on disk
            self._count(len(batch), before[0], began)
        except _Again:
            self._rollback(conn, before)
            alone = True
        except Exception as e:  # disk full, I/O error, a bug: nothing of the batch is acknowledged
            if not all(op.quiet for op in batch):
                self._said("storage batch failed, rolled back", e)
            self.last_fault = e
            self._rollback(conn, before)
            failure = refusals.storage_unavailable(
                f"storage failed ({kind(self._path, e)}); the request was not recorded"
            )
            outcomes = [(False, failure)] * len(batch)
        finally:
            if lock is not None and not alone:
                lock.release()
        if alone:  # still holding the lock: each operation in a transaction of its own
            try:
                outcomes = [self._run_alone(conn, op) for op in batch]
            finally:
                if lock is not None:
                    lock.release()
        settle(batch, outcomes)

    def _run_op(self, conn: sqlite3.Connection, op: Op) -> tuple[bool, Any]:
        """Run ``op`` in the transaction under way: its outcome. A refusal (REFUSED) has written
        nothing, and its appends are undone here; any other exception is raised."""
        mark = self.tail.mark()
        try:
            return True, op.fn(conn)
        except REFUSED as e:
            self.tail.restore(mark)
            return False, e

    def _run_alone(self, conn: sqlite3.Connection, op: Op) -> tuple[bool, Any]:
        """``op`` in a transaction of its own (the writers' lock is held), so that a failure
        stays with it."""
        before = self.tail.mark()
        began = time.perf_counter()
        try:
            conn.execute("BEGIN IMMEDIATE")
            outcome = self._run_op(conn, op)
            if not outcome[0]:
                self._rollback(conn, before)
                return outcome
            conn.execute("COMMIT")
            self._count(1, before[0], began)
            return outcome
        except Exception as e:
            self._rollback(conn, before)
            return False, self._op_failure(e, quiet=op.quiet)

    def _rollback(self, conn: sqlite3.Connection, before: Mark) -> None:
        # A ROLLBACK that fails too (the disk is gone) must not end the writer thread:
        # every later call would then wait forever instead of failing.
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        self.tail.restore(before)

    def _op_failure(self, e: Exception, *, quiet: bool = False) -> Exception:
        """What the caller of a failed operation gets: a refusal as it is, a database
        failure as STORAGE_UNAVAILABLE saying what kind (logged in one line, no traceback,
        no request data), anything else (a bug) as it is, for the servicer to answer INTERNAL."""
        if isinstance(e, refusals.DealerError):
            return e
        if not quiet:
            self._said("storage operation failed, rolled back", e)
        if is_storage_fault(e):
            self.last_fault = e
            return refusals.storage_unavailable(
                f"storage failed ({kind(self._path, e)}); the request was not recorded"
            )
        return e

    def _said(self, what: str, e: BaseException) -> None:
        """One log line for a failure: the class and SQLite's error name, never a value."""
        log.log(logging.DEBUG if self.quiet else logging.ERROR, "%s: %s", what, error_name(e))

    def _count(self, operations: int, size_before: int, began: float) -> None:
        stats = self.stats
        stats.batches += 1
        stats.operations += operations
        stats.appends += self.tail.size - size_before
        stats.transaction_seconds += time.perf_counter() - began

    def _take_lock(self, lock: WriterLock) -> bool:
        """The writers' lock within LOCK_TIMEOUT, saying once per stall (in one line each way)
        that another process holds it and makes no progress, and when it moves again."""
        if lock.acquire(None if self._stalled_since is None else STALLED_WAIT):
            if self._stalled_since is not None:
                log.warning(
                    "took the writers' lock %s again after %.1f s; writes are recorded again",
                    lock.path,
                    time.monotonic() - self._stalled_since,
                )
                self._stalled_since = None
            return True
        if self._stalled_since is None:
            self._stalled_since = time.monotonic() - lock.timeout
            holder = lock.holder()
            log.error(
                "the writers' lock %s was not free within %.1f s (held by %s): writes fail "
                "STORAGE_UNAVAILABLE until it is",
                lock.path,
                lock.timeout,
                f"pid {holder}" if holder is not None else "another process",
            )
        return False

    def fault(self, e: BaseException) -> None:
        """A database error met elsewhere (the reader): what ``explain`` says next."""
        self.last_fault = e

    @property
    def shared(self) -> bool:
        """Other processes write this database too (``serve --processes N``)."""
        return self._lock is not None

    def lock_held_for(self) -> float:
        """Seconds this writer has held the writers' lock in the batch under way (0: not held)."""
        return 0.0 if self._lock is None else self._lock.held_for()

    def _create_together(self, conn: sqlite3.Connection, creations: list[Op]) -> list[tuple[bool, Any]]:
        """Write the hands of several plain creations with one set of INSERTs; their outcomes.
        Nothing in them can be refused, so a failure here fails the batch (the caller's)."""
        if not creations:
            return []
        rows = Rows()
        out = [(True, op.rows(rows)) for op in creations if op.rows is not None]
        rows.write(conn)
        return out

    def connect(self) -> sqlite3.Connection:
        """Open the database and load the log's size and frontier from it."""
        conn = open_database(self._path, create=self._create)
        try:
            self.tail.load(conn)
        except BaseException:
            conn.close()
            raise
        return conn


class _Again(Exception):
    """An operation failed after it may have written: run the batch again one by one."""


READ_QUANTUM = 16
"""A tenant's turn in a read transaction, in reads."""
READ_MOST = 64
"""Reads per read transaction, at most: a newly arrived read waits for at most one of these."""


class SqliteReader(OpQueue):
    """The reader thread and its connection (opened once the writer has made the database)."""

    def __init__(
        self,
        path: Path,
        refused: tuple[type[BaseException], ...],
        on_fault: Callable[[BaseException], None],
    ) -> None:
        """``refused``: what a read raises to refuse (passed on as it is); ``on_fault(e)``: a
        database error, for the storage's diagnosis."""
        super().__init__()
        self._path = path
        self._refused = refused
        self._on_fault = on_fault
        self._thread = threading.Thread(target=self._run, name="fairdeck-sqlite-reader", daemon=True)
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self.quiet = True
        """Until the dealer serves, failures are logged at DEBUG (the writer's rule)."""

    async def start(self) -> None:
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._startup_error is not None:
            raise self._startup_error

    async def close(self, timeout: float) -> None:
        if self._closed:
            return
        self._flush(asyncio.get_running_loop())
        self._closed = True
        self._queue.put(None)
        if self._thread.ident is not None:
            await asyncio.to_thread(self._thread.join, timeout)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            f"file:{quote(str(self._path.absolute()))}?mode=rw",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute("PRAGMA query_only=1")
        return conn

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as e:  # reported to start(), in one line
            self._startup_error = refusals.StartupRefused(f"cannot open database {self._path} to read: {e}")
            self._ready.set()
            return
        self._ready.set()
        turns: FairQueue[Op] = FairQueue(READ_QUANTUM)
        stop = False
        while not (stop and not turns):
            if not turns and not stop:
                ops = self._queue.get()
                stop = ops is None
                for op in ops or ():
                    turns.push(op.whose, op, 1)
            while not stop:
                try:
                    ops = self._queue.get_nowait()
                except queue.Empty:
                    break
                stop = ops is None
                for op in ops or ():
                    turns.push(op.whose, op, 1)
            batch = take_turns(turns, alone=READ_MOST, most=READ_MOST)
            if batch:
                try:
                    outcomes = self._read(conn, batch)
                except Exception as e:  # a bug of this thread's own: fail the batch, stay alive
                    log.error("storage reads failed: %s", cause(e))
                    outcomes = [(False, e)] * len(batch)
                settle(batch, outcomes)
        conn.close()

    def _read(self, conn: sqlite3.Connection, batch: list[Op]) -> list[tuple[bool, Any]]:
        """``batch`` in one read transaction (one snapshot, begun now: after each was submitted)."""
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN")
            for op in batch:
                try:
                    outcomes.append((True, op.fn(conn)))
                except self._refused as e:
                    outcomes.append((False, e))
                except sqlite3.Error as e:
                    outcomes.append((False, self._failure(e, op.quiet)))
                except Exception as e:  # a bug: that read fails as it is (INTERNAL), the others go on
                    outcomes.append((False, e))
        except sqlite3.Error as e:  # BEGIN failed: every read of the batch fails the same way
            failure = self._failure(e, False)
            outcomes += [(False, failure)] * (len(batch) - len(outcomes))
        finally:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("COMMIT")
        return outcomes

    def _failure(self, e: sqlite3.Error, quiet: bool) -> Exception:
        self._on_fault(e)
        if not quiet:
            log.log(logging.DEBUG if self.quiet else logging.ERROR, "storage read failed: %s", error_name(e))
        return refusals.storage_unavailable(f"storage failed ({kind(self._path, e)}); nothing was read")
