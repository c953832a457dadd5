"""The embedded engine: SQLite in WAL mode with synchronous=FULL and group commit.

One writer thread owns the connection. Operations queue up while the
previous transaction is being made durable, and the next transaction takes
all of them at once: one fsync covers the whole batch, so durability costs
latency, not throughput. Each operation runs inside its own savepoint, so a
refused request rolls back alone. Futures are resolved only after COMMIT
returned, i.e. after the WAL is on disk: nothing is acknowledged before then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from fairdeck_server import errors
from fairdeck_server.storage.base import (
    Change,
    HandRecord,
    HandState,
    NewHand,
    decode_seeds,
    encode_seeds,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_BATCH = 512
SCHEMA = """
CREATE TABLE IF NOT EXISTS hands (
    hand_id      TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    request_id   TEXT,
    deck         TEXT NOT NULL,
    version      TEXT NOT NULL,
    commitment   BLOB NOT NULL,
    sealed_seed  BLOB NOT NULL,   -- AES-256-GCM, never the plain seed
    client_seeds BLOB NOT NULL,
    state        INTEGER NOT NULL,
    dealt        INTEGER NOT NULL,
    created_ms   INTEGER NOT NULL,
    commit_index INTEGER NOT NULL,
    closed_ms    INTEGER,
    server_seed  BLOB,            -- set only when revealed
    reveal_index INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS hands_request ON hands (tenant, request_id)
    WHERE request_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS hands_open ON hands (state, created_ms) WHERE state != 3;
CREATE TABLE IF NOT EXISTS log_entries (
    idx   INTEGER PRIMARY KEY,
    entry BLOB NOT NULL
);
"""
_COLUMNS = (
    "hand_id, tenant, request_id, deck, version, commitment, sealed_seed, client_seeds, state, dealt, "
    "created_ms, commit_index, closed_ms, server_seed, reveal_index"
)
_INSERT = f"INSERT INTO hands ({_COLUMNS}) VALUES ({', '.join('?' * 15)})"  # noqa: S608 - constants
_UPDATE = (
    "UPDATE hands SET client_seeds = ?, state = ?, dealt = ?, closed_ms = ?, server_seed = ?, "
    "reveal_index = ? WHERE hand_id = ?"
)

_Op = tuple[Callable[[sqlite3.Connection], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class SqliteStorage:
    """Storage on one SQLite file, written by one thread with group commit."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._closed = False
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._log_size = 0
        self._thread = threading.Thread(target=self._run, name="fairdeck-sqlite-writer", daemon=True)

    async def start(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._startup_error is not None:
            raise self._startup_error

    # -- the Storage interface ------------------------------------------------

    async def create_hands(self, hands: Sequence[NewHand]) -> list[HandRecord]:
        return await self._submit(lambda conn: [self._create(conn, h) for h in hands])

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        return await self._submit(lambda conn: _select(conn, tenant, hand_id))

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        def op(conn: sqlite3.Connection) -> tuple[HandRecord, T]:
            current = _select(conn, tenant, hand_id)
            if current is None:
                raise errors.hand_not_found()
            change, result = decide(current)
            new = change.record
            if change.log_entry is not None:
                new = replace(new, reveal_index=self._append(conn, change.log_entry))
            if new == current:
                return new, result
            conn.execute(
                _UPDATE,
                (
                    encode_seeds(new.client_seeds),
                    int(new.state),
                    new.dealt,
                    new.closed_ms,
                    new.server_seed,
                    new.reveal_index,
                    new.hand_id,
                ),
            )
            return new, result

        return await self._submit(op)

    async def log_size(self) -> int:
        return await self._submit(lambda conn: self._log_size)

    async def log_entries(self, start: int, end: int) -> list[bytes]:
        def op(conn: sqlite3.Connection) -> list[bytes]:
            rows = conn.execute(
                "SELECT entry FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, end)
            ).fetchall()
            return [bytes(r[0]) for r in rows]

        return await self._submit(op)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)

    # -- inside the writer thread ----------------------------------------------

    def _create(self, conn: sqlite3.Connection, new: NewHand) -> HandRecord:
        r = new.record
        if r.request_id is not None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM hands WHERE tenant = ? AND request_id = ?",  # noqa: S608
                (r.tenant, r.request_id),
            ).fetchone()
            if row is not None:
                existing = _record(row)
                if existing.deck != r.deck:
                    raise errors.DealerError(
                        errors.Status.ALREADY_EXISTS,
                        "REQUEST_ID_REUSED",
                        "request_id was already used to open a hand with another deck",
                        "request_id",
                    )
                return existing
        index = self._append(conn, new.log_entry)
        reveal_index = None if new.reveal_entry is None else self._append(conn, new.reveal_entry)
        conn.execute(
            _INSERT,
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
            ),
        )
        return replace(r, commit_index=index, reveal_index=reveal_index)

    def _append(self, conn: sqlite3.Connection, entry: bytes) -> int:
        index = self._log_size
        conn.execute("INSERT INTO log_entries (idx, entry) VALUES (?, ?)", (index, entry))
        self._log_size = index + 1
        return index

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as e:  # reported to start()
            self._startup_error = errors.storage_unavailable(f"cannot open database {self._path}: {e}")
            self._ready.set()
            return
        self._ready.set()
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._run_batch(conn, batch)
        conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Op]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        log_size_before = self._log_size
        try:
            conn.execute("BEGIN IMMEDIATE")
            for fn, _, _ in batch:
                mark = self._log_size
                conn.execute("SAVEPOINT op")
                try:
                    outcomes.append((True, fn(conn)))
                    conn.execute("RELEASE op")
                except Exception as e:  # refused (DealerError) or a bug: this op alone rolls back
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    self._log_size = mark
                    if not isinstance(e, errors.DealerError):
                        log.error("storage operation failed: %s", type(e).__name__)
                    outcomes.append((False, e))
            conn.execute("COMMIT")  # synchronous=FULL: returns once the WAL is on disk
        except Exception as e:  # disk full, I/O error, a bug: nothing of the batch is acknowledged
            log.error("storage batch failed, rolled back: %s", type(e).__name__)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._log_size = log_size_before
            failure = errors.storage_unavailable("storage failed; the request was not recorded")
            outcomes = [(False, failure)] * len(batch)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for (_, loop, fut), (ok, value) in zip(batch, outcomes, strict=True):
            by_loop.setdefault(loop, []).append((fut, ok, value))
        for loop, items in by_loop.items():  # one wake-up per loop per batch
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_resolve, items)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(f"journal_mode is {mode}, WAL required")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.executescript(SCHEMA)
        row = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0), COUNT(*) FROM log_entries").fetchone()
        if row[0] != row[1]:
            raise RuntimeError("log_entries has gaps: the log is damaged")
        self._log_size = row[0]
        return conn

    async def _submit(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise errors.storage_unavailable("storage is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, loop, fut))
        return await fut


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in items:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _select(conn: sqlite3.Connection, tenant: str, hand_id: str) -> HandRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
    if row is None or row[1] != tenant:
        return None
    return _record(row)


def _record(row: tuple[Any, ...]) -> HandRecord:
    return HandRecord(
        hand_id=row[0],
        tenant=row[1],
        request_id=row[2],
        deck=row[3],
        version=row[4],
        commitment=bytes(row[5]),
        sealed_seed=bytes(row[6]),
        client_seeds=decode_seeds(bytes(row[7])),
        state=HandState(row[8]),
        dealt=row[9],
        created_ms=row[10],
        commit_index=row[11],
        closed_ms=row[12],
        server_seed=None if row[13] is None else bytes(row[13]),
        reveal_index=row[14],
    )
