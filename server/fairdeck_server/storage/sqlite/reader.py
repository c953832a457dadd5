"""Reading the database without writing: the live dealer's reader thread (``SqliteReader``), and
the read-only view of a data dir's log for ``fairdeck audit --data`` (``read_log``).

``SqliteReader``: one thread with a query-only connection of its own, for every read that needs
no state of the writer's (a hand, a token, a count, log entries, proofs, checkpoints). In WAL mode
it never waits for the writer nor the writer for it, so a flood of reads takes no turns in the
writer's batches, and reads go on while the writers' lock of ``--processes`` is stuck. Reads come
in fair turns (fair.take_turns), several in one read transaction begun after every one of them was
submitted: a read sees every write acknowledged before it was asked for.

``read_log`` opens the file read-only (never creates it), writes nothing and holds no snapshot
long: entries are read in pages, each its own short read transaction, so a long audit never keeps
the dealer's WAL from restarting (entries never change once written, so pages agree).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fairdeck.log.audit import LogUnreadable
from fairdeck_server import refusals
from fairdeck_server.fair import FairQueue, take_turns
from fairdeck_server.log_causes import cause
from fairdeck_server.storage.base import entries_in_order
from fairdeck_server.storage.sqlite.diagnosis import error_name, kind, unreadable
from fairdeck_server.storage.sqlite.handoff import Op, OpQueue, settle

PAGE = 5000
"""Entries per read transaction."""


def read_log(path: Path) -> tuple[int, list[bytes], Iterator[bytes]]:
    """Read-only view of a data dir's log for ``fairdeck audit --data``.

    Returns (entry count, every signed checkpoint note, an iterator over the
    entries in index order). Nothing is written, nothing is created (the file
    is opened read-only, never made), and no lock is held long. A missing,
    corrupt or foreign database raises ``LogUnreadable`` naming the file and
    the fix, also from the iterator when the damage lies further in the file.
    """
    if not path.is_file():
        raise LogUnreadable(
            f"no dealer database at {path}: --data must name the data dir of `fairdeck serve` "
            f"(the one holding {path.name})"
        )
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise unreadable(path, e) from None
    try:
        count = conn.execute("SELECT COUNT(*) FROM log_entries").fetchone()[0]
        notes = [bytes(r[0]) for r in conn.execute("SELECT note FROM checkpoints ORDER BY size")]
        notes += [
            str(r[0]).encode()
            for r in conn.execute(
                "SELECT value FROM fairdeck_meta WHERE name LIKE 'log_key_rotation/%' ORDER BY name"
            )
        ]
    except sqlite3.Error as e:
        conn.close()
        raise unreadable(path, e) from None

    def pages() -> Iterator[tuple[int, bytes]]:
        start = 0
        while True:
            page = conn.execute(
                "SELECT idx, entry FROM log_entries WHERE idx >= ? ORDER BY idx LIMIT ?", (start, PAGE)
            ).fetchall()  # all of it: the read transaction ends here
            yield from page
            if len(page) < PAGE:
                return
            start = int(page[-1][0]) + 1

    def entries() -> Iterator[bytes]:
        try:
            yield from entries_in_order(pages())
        except sqlite3.Error as e:
            raise unreadable(path, e) from None
        finally:
            conn.close()

    return count, notes, entries()


log = logging.getLogger(__name__)

QUANTUM = 16
"""A tenant's turn in a read transaction, in reads."""
MOST = 64
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
        turns: FairQueue[Op] = FairQueue(QUANTUM)
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
            batch = take_turns(turns, alone=MOST, most=MOST)
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
