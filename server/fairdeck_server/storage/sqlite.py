"""The embedded engine: SQLite in WAL mode with synchronous=FULL and group commit.

One writer thread owns the connection. Operations queue up while the
previous transaction is being made durable, and the next transaction takes
all of them at once: one fsync covers the whole batch, so durability costs
latency, not throughput. Each operation runs inside its own savepoint, so a
refused request rolls back alone. Futures are resolved only after COMMIT
returned, i.e. after the WAL is on disk: nothing is acknowledged before then.

The writer shares the GIL with the event loop, and every SQLite call releases it
and must win it back from a busy loop (up to ``sys.getswitchinterval()``, 5 ms,
each time). So a transaction makes as few calls as it can: rows go in as
multi-row INSERTs of a few fixed sizes (prepared once, from the statement
cache), and the plain hand creations of a batch (no request id: nothing to look
up, nothing to refuse) are written together under one savepoint, not one each.
A 256-row insert with a busy Python thread beside it took 1.6-3.9 ms per row as
``executemany`` (a GIL hand-off per row) and 0.03-0.5 ms per row as multi-row
INSERTs (bench/README.md, issue 15).

Bulk operations (a DealHands chunk: many hands at once) wait apart: each
transaction takes every ordinary operation queued and at most one bulk one,
so a tenant's streams of thousands of hands cannot make another tenant's
single hand wait behind all of them (bench/README.md, the abuse benchmark).
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from fairdeck.log import merkle
from fairdeck.log.audit import LogUnreadable
from fairdeck.log.cosignature import add_cosignatures
from fairdeck_server import refusals
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.storage.base import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    Change,
    HandRecord,
    LogForkError,
    NewHand,
    StoredCheckpoint,
    TokenRecord,
    WriterStats,
    _Frontier,
    encode_seeds,
    entries_in_order,
    hand_record,
    same_request,
    token_record,
    token_row,
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
    reveal_index INTEGER,
    request_fp   BLOB             -- what the idempotent open asked for
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS hands_request ON hands (tenant, request_id)
    WHERE request_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS hands_unrevealed ON hands (created_ms) WHERE state != 3;
CREATE TABLE IF NOT EXISTS log_entries (
    idx   INTEGER PRIMARY KEY,
    entry BLOB NOT NULL
);
-- Merkle tree hashes in Go sumdb's stored-hash layout (fairdeck.log.merkle):
-- an append writes O(1) amortised rows, a proof reads O(log n).
CREATE TABLE IF NOT EXISTS log_hashes (
    idx  INTEGER PRIMARY KEY,
    hash BLOB NOT NULL
);
-- Signed checkpoints; the head is the largest size. One row per size, ever.
CREATE TABLE IF NOT EXISTS checkpoints (
    size    INTEGER PRIMARY KEY,
    root    BLOB NOT NULL,
    note    BLOB NOT NULL,
    time_ms INTEGER NOT NULL
);
-- API tokens: only a digest of the secret part is stored.
CREATE TABLE IF NOT EXISTS tokens (
    token_id   TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    role       TEXT NOT NULL,
    digest     BLOB NOT NULL,
    created_ms INTEGER NOT NULL,
    label      TEXT NOT NULL,
    revoked_ms INTEGER
) WITHOUT ROWID;
-- Facts about the log itself: 'log_key' is the verifier key (public) of the key that signs it.
CREATE TABLE IF NOT EXISTS fairdeck_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"""
TABLES = ("hands", "log_entries", "log_hashes", "checkpoints")
"""Tables every fairdeck database has had from the start: one without them is truncated or not ours."""
ROW_GROUPS = (256, 128, 64, 32, 16, 8, 4, 2, 1)
"""Rows per multi-row INSERT: n rows (n < 512) go in as one statement per set bit of n,
so the few SQL strings stay in sqlite3's statement cache. 256 x 16 hand columns is
4,096 bound values, well under SQLite's 32,766."""
_UPDATE = (
    "UPDATE hands SET client_seeds = ?, state = ?, dealt = ?, closed_ms = ?, server_seed = ?, "
    "reveal_index = ? WHERE hand_id = ?"
)


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


class SqliteStorage:
    """Storage on one SQLite file, written by one thread with group commit."""

    def __init__(self, path: Path, *, create: bool = True, writer_lock: Path | None = None) -> None:
        """``create``: make the file and its tables if missing. Without it, a missing,
        empty or table-less file is refused (StartupRefused) and nothing is written.

        ``writer_lock``: other processes write this database too (``serve --processes N``).
        Each batch then first takes an exclusive flock on this file, and takes in what the
        others appended (``_catch_up``). Without it this writer is the only one (the data dir
        lock sees to that), and a batch pays for neither. SQLite's own wait for its
        write lock polls, sleeping 1, 2, 5 ... up to 100 ms between tries, which would add tens
        of milliseconds to a call whenever the other process is committing; a blocked flock
        wakes as soon as the lock is free.
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
        self._log_size = 0
        self._frontier = _Frontier([])
        self._thread = threading.Thread(target=self._run, name="fairdeck-sqlite-writer", daemon=True)
        self.stats = WriterStats()
        """Written by the writer thread only; readers see whole numbers, possibly a batch behind."""

    async def start(self) -> None:
        if self._create:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        elif not self._path.is_file() or self._path.stat().st_size == 0:
            raise StartupRefused(
                f"no database at {self._path} ({'empty file' if self._path.is_file() else 'missing'}): "
                "restore it from backup, or create a new data dir with `fairdeck init`"
            )
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._startup_error is not None:
            raise self._startup_error

    # -- the Storage interface ------------------------------------------------

    async def create_hands(self, hands: Sequence[NewHand]) -> list[HandRecord]:
        plain = all(new.record.request_id is None for new in hands)
        return await self._submit(
            lambda conn: self._create_many(conn, hands), bulk=len(hands) > 1, hands=hands if plain else None
        )

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        return await self._submit(lambda conn: _select(conn, tenant, hand_id))

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        def op(conn: sqlite3.Connection) -> tuple[HandRecord, T]:
            current = _select(conn, tenant, hand_id)
            if current is None:
                raise refusals.hand_not_found()
            change, result = decide(current)
            new = change.record
            if change.log_entry is not None:
                rows = _Rows()
                new = replace(new, reveal_index=self._append(change.log_entry, rows))
                rows.write(conn)
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

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str]]:
        def op(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = conn.execute(
                # state != 3 spelled as in the partial index, so the index serves the query
                "SELECT tenant, hand_id FROM hands WHERE state != 3 AND created_ms < ? "
                "ORDER BY created_ms LIMIT ?",
                (created_before_ms, limit),
            ).fetchall()
            return [(r[0], r[1]) for r in rows]

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

    async def log_head(self) -> tuple[int, bytes]:
        """(size, root) of the log as durably stored now."""
        return await self._submit(
            lambda conn: (self._log_size, merkle.tree_hash(self._log_size, _hash_reader(conn)))
        )

    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None:
        """The signed checkpoint at ``size``, or the latest one; None if there is none."""

        def op(conn: sqlite3.Connection) -> StoredCheckpoint | None:
            if size is None:
                row = conn.execute(
                    "SELECT size, root, note FROM checkpoints ORDER BY size DESC LIMIT 1"
                ).fetchone()
            else:
                row = conn.execute(
                    "SELECT size, root, note FROM checkpoints WHERE size = ?", (size,)
                ).fetchone()
            return None if row is None else StoredCheckpoint(row[0], bytes(row[1]), bytes(row[2]))

        return await self._submit(op)

    async def put_checkpoint(self, size: int, root: bytes, note: bytes, time_ms: int) -> StoredCheckpoint:
        """Store a signed checkpoint if it moves the head forward (compare-and-swap).

        Returns the head afterwards. A checkpoint for a size already signed is
        never replaced; one with a different root there, or a root that is not
        the stored tree's, raises LogForkError and is not stored.
        """

        def op(conn: sqlite3.Connection) -> StoredCheckpoint:
            same = conn.execute("SELECT size, root, note FROM checkpoints WHERE size = ?", (size,)).fetchone()
            if same is not None:
                if bytes(same[1]) != root:
                    raise LogForkError(f"a different root is already signed for tree size {size}")
                return StoredCheckpoint(same[0], bytes(same[1]), bytes(same[2]))
            if size > self._log_size or merkle.tree_hash(size, _hash_reader(conn)) != root:
                raise LogForkError(f"checkpoint root for size {size} is not the stored tree's")
            head = conn.execute(
                "SELECT size, root, note FROM checkpoints ORDER BY size DESC LIMIT 1"
            ).fetchone()
            if head is not None and head[0] > size:
                return StoredCheckpoint(head[0], bytes(head[1]), bytes(head[2]))
            conn.execute(
                "INSERT INTO checkpoints (size, root, note, time_ms) VALUES (?, ?, ?, ?)",
                (size, root, note, time_ms),
            )
            return StoredCheckpoint(size, root, note)

        return await self._submit(op)

    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        def op(conn: sqlite3.Connection) -> StoredCheckpoint | None:
            row = conn.execute("SELECT root, note FROM checkpoints WHERE size = ?", (size,)).fetchone()
            if row is None:
                return None
            note = add_cosignatures(bytes(row[1]), lines)
            if note != bytes(row[1]):
                conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))
            return StoredCheckpoint(size, bytes(row[0]), note)

        return await self._submit(op)

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        return await self._submit(lambda conn: merkle.prove_inclusion(index, size, _hash_reader(conn)))

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return await self._submit(lambda conn: merkle.prove_consistency(size1, size2, _hash_reader(conn)))

    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
        column = "reveal_index" if reveal else "commit_index"

        def op(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(f"SELECT {column} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
            return None if row is None else row[0]

        return await self._submit(op)

    async def open_hands(self, tenant: str | None = None) -> int:
        def op(conn: sqlite3.Connection) -> int:
            if tenant is None:
                row = conn.execute("SELECT COUNT(*) FROM hands WHERE state != 3").fetchone()
            else:
                row = conn.execute(
                    "SELECT COUNT(*) FROM hands WHERE state != 3 AND tenant = ?", (tenant,)
                ).fetchone()
            return int(row[0])

        return await self._submit(op)

    async def put_token(self, token: TokenRecord) -> None:
        def op(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                    token_row(token),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"token {token.token_id} already exists") from None

        await self._submit(op)

    async def get_token(self, token_id: str) -> TokenRecord | None:
        def op(conn: sqlite3.Connection) -> TokenRecord | None:
            row = conn.execute(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?",  # noqa: S608
                (token_id,),
            ).fetchone()
            return None if row is None else token_record(row)

        return await self._submit(op)

    async def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        def op(conn: sqlite3.Connection) -> list[TokenRecord]:
            query = f"SELECT {TOKEN_COLUMNS} FROM tokens"  # noqa: S608
            if tenant is None:
                rows = conn.execute(query + " ORDER BY created_ms, token_id").fetchall()
            else:
                rows = conn.execute(
                    query + " WHERE tenant = ? ORDER BY created_ms, token_id", (tenant,)
                ).fetchall()
            return [token_record(r) for r in rows]

        return await self._submit(op)

    async def revoke_token(self, token_id: str, when_ms: int) -> TokenRecord | None:
        def op(conn: sqlite3.Connection) -> TokenRecord | None:
            conn.execute(
                "UPDATE tokens SET revoked_ms = ? WHERE token_id = ? AND revoked_ms IS NULL",
                (when_ms, token_id),
            )
            row = conn.execute(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?",  # noqa: S608
                (token_id,),
            ).fetchone()
            return None if row is None else token_record(row)

        return await self._submit(op)

    async def probe(self) -> None:
        """One row rewritten and committed like any batch (same lock, WAL append and
        fsync), so it fails when a write would: locked, read-only, full, I/O error."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS health_probe "
                "(id INTEGER PRIMARY KEY CHECK (id = 1), at_ms INTEGER NOT NULL)"
            )
            conn.execute(
                "INSERT OR REPLACE INTO health_probe (id, at_ms) VALUES (1, ?)",
                (time.time_ns() // 1_000_000,),
            )

        await self._submit(op)

    async def close(self) -> None:
        if self._closed:
            return
        self._flush(asyncio.get_running_loop())  # what this loop submitted before close runs
        self._closed = True
        self._queue.put(None)
        if self._thread.ident is not None:  # never started (the dealer refused to start): nothing to join
            await asyncio.to_thread(self._thread.join)

    # -- inside the writer thread ----------------------------------------------

    def _create_many(self, conn: sqlite3.Connection, hands: Sequence[NewHand]) -> list[HandRecord]:
        """Insert hands with their log entries: a few multi-row INSERTs per table, not one per row."""
        rows = _Rows()
        out = self._create_rows(conn, hands, rows)
        rows.write(conn)
        return out

    def _create_rows(
        self, conn: sqlite3.Connection, hands: Sequence[NewHand], rows: _Rows
    ) -> list[HandRecord]:
        """Give ``hands`` their log indexes and queue their rows in ``rows`` (written by the caller)."""
        out = []
        for new in hands:
            r = new.record
            existing = self._existing(conn, r) if r.request_id is not None else None
            if existing is not None:
                out.append(existing)
                continue
            index = self._append(new.log_entry, rows)
            reveal_index = None if new.reveal_entry is None else self._append(new.reveal_entry, rows)
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
            out.append(replace(r, commit_index=index, reveal_index=reveal_index))
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

    def _append(self, entry: bytes, rows: _Rows) -> int:
        """Give ``entry`` the next index and queue it with its stored hashes.

        The left siblings an append needs are always on the frontier (the
        complete subtrees of the current tree), kept in memory, so an append
        reads nothing from the database.
        """
        index = self._log_size
        frontier = self._frontier
        hashes = merkle.stored_hashes_for_append(index, merkle.leaf_hash(entry), frontier.read)
        start = merkle.stored_hash_index(0, index)
        rows.entries.append((index, entry))
        rows.hashes.extend((start + i, h) for i, h in enumerate(hashes))
        frontier.push(start, hashes)
        self._log_size = index + 1
        return index

    def _run(self) -> None:
        try:
            conn = self._connect()
        except StartupRefused as e:  # reported to start(), as it is
            self._startup_error = e
            self._ready.set()
            return
        except BaseException as e:  # reported to start()
            self._startup_error = StartupRefused(f"cannot open database {self._path}: {e}")
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
        before = (self._log_size, self._frontier.copy())
        began = time.perf_counter()
        if self._writer_fd >= 0:
            fcntl.flock(self._writer_fd, fcntl.LOCK_EX)  # blocks this thread only; the GIL is released
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._writer_fd >= 0 and self._catch_up(conn):  # others write too: take in theirs
                before = (self._log_size, self._frontier.copy())
            fused = self._create_together(conn, [op for op in batch if op[4] is not None])
            outcomes.extend((True, records) for records in fused)
            for fn, _, _, _, _ in batch[len(fused) :]:
                mark = (self._log_size, self._frontier.copy())
                conn.execute("SAVEPOINT op")
                try:
                    outcomes.append((True, fn(conn)))
                    conn.execute("RELEASE op")
                except Exception as e:  # refused, the database failing, or a bug: this op alone rolls back
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    self._log_size, self._frontier = mark
                    outcomes.append((False, _op_failure(e)))
            conn.execute("COMMIT")  # synchronous=FULL: returns once the WAL is on disk
            stats = self.stats
            stats.batches += 1
            stats.operations += len(batch)
            stats.appends += self._log_size - before[0]
            stats.transaction_seconds += time.perf_counter() - began
        except Exception as e:  # disk full, I/O error, a bug: nothing of the batch is acknowledged
            log.error("storage batch failed, rolled back: %s", _what(e))
            # A ROLLBACK that fails too (the disk is gone) must not end the writer thread:
            # every later call would then wait forever instead of failing.
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            self._log_size, self._frontier = before
            failure = refusals.storage_unavailable("storage failed; the request was not recorded")
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

    def _catch_up(self, conn: sqlite3.Connection) -> bool:
        """Take in what other processes appended (``serve --processes N``, docs/scaling.md).

        Under BEGIN IMMEDIATE this writer holds the database's one write lock, so the log's size
        cannot move until COMMIT. When another process has appended since this writer's last
        batch, the frontier is read again from the stored hashes (O(log n) rows); otherwise this
        costs one lookup of the largest index.
        """
        size = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM log_entries").fetchone()[0]
        if size == self._log_size:
            return False
        self._log_size = size
        self._frontier = _Frontier.load(size, _hash_reader(conn))
        return True

    def _create_together(self, conn: sqlite3.Connection, creations: list[_Op]) -> list[list[HandRecord]]:
        """Write the hands of several plain creations with one set of INSERTs, under one
        savepoint; their records, one list per creation. If that fails (it should not:
        nothing in them can be refused), undo it and return [], and the caller runs them
        one by one, each in its own savepoint, so a failure stays with its operation."""
        if not creations:
            return []
        mark = (self._log_size, self._frontier.copy())
        rows = _Rows()
        conn.execute("SAVEPOINT together")
        try:
            out = [self._create_rows(conn, op[4] or (), rows) for op in creations]
            rows.write(conn)
            conn.execute("RELEASE together")
        except Exception:
            conn.execute("ROLLBACK TO together")
            conn.execute("RELEASE together")
            self._log_size, self._frontier = mark
            return []
        return out

    def _connect(self) -> sqlite3.Connection:
        # Without create, mode=rw: a file that vanished since start() is not made again, empty.
        target = self._path if self._create else f"file:{quote(str(self._path.absolute()))}?mode=rw"
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, uri=not self._create)
        try:
            self._check(conn)
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise RuntimeError(f"journal_mode is {mode}, WAL required")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.executescript(SCHEMA)  # IF NOT EXISTS: adds only tables a newer version brought
            row = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0), COUNT(*) FROM log_entries").fetchone()
            if row[0] != row[1]:
                raise StartupRefused(
                    f"database {self._path}: log_entries has gaps, the log is damaged; restore it from backup"
                )
            self._log_size = row[0]
            self._frontier = _Frontier.load(self._log_size, _hash_reader(conn))
        except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
            conn.close()
            raise StartupRefused(f"database {self._path} is damaged ({e}); restore it from backup") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _check(self, conn: sqlite3.Connection) -> None:
        """Refuse a database that is not whole: no tables (truncated, or not ours) or damaged pages.

        quick_check reads every page (not the index contents), so a page of garbage in
        the middle of the file is found here, at start, not by the hand that lands on it.
        """
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not self._create and not set(TABLES) <= names:
            raise StartupRefused(
                f"database {self._path} has no fairdeck tables (truncated, or not a fairdeck database); "
                "restore it from backup"
            )
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise StartupRefused(
                f"database {self._path} is damaged (PRAGMA quick_check: {'; '.join(problems)}); "
                "restore it from backup"
            )

    # -- start-up checks of the log's identity (fairdeck_server.startup) --------

    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]:
        """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal)."""

        def op(conn: sqlite3.Connection) -> list[tuple[str, bytes]]:
            rows = conn.execute(
                "SELECT MIN(hand_id), substr(sealed_seed, 2, 4) FROM hands WHERE state != 3 "
                "GROUP BY substr(sealed_seed, 2, 4)"
            ).fetchall()
            out = []
            for hand_id, _ in rows:
                sealed = conn.execute(
                    "SELECT sealed_seed FROM hands WHERE hand_id = ?", (hand_id,)
                ).fetchone()
                out.append((str(hand_id), bytes(sealed[0])))
            return out

        return await self._submit(op)

    async def get_meta(self, name: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM fairdeck_meta WHERE name = ?", (name,)).fetchone()
            return None if row is None else str(row[0])

        return await self._submit(op)

    async def set_meta(self, name: str, expected: str | None, value: str) -> bool:
        """Set ``name`` to ``value`` if it is still ``expected`` (None: unset); False if it was not."""

        def op(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT value FROM fairdeck_meta WHERE name = ?", (name,)).fetchone()
            if (None if row is None else str(row[0])) != expected:
                return False
            conn.execute(
                "INSERT INTO fairdeck_meta (name, value) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (name, value),
            )
            return True

        return await self._submit(op)

    async def _submit(
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


class _Rows:
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


def _hash_reader(conn: sqlite3.Connection) -> Callable[[list[int]], list[bytes]]:
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


def _op_failure(e: Exception) -> Exception:
    """What the caller of a failed operation gets: a refusal as it is, a database
    failure as STORAGE_UNAVAILABLE (logged in one line, no traceback, no request
    data), anything else (a bug) as it is, for the servicer to answer INTERNAL."""
    if isinstance(e, refusals.DealerError):
        return e
    log.error("storage operation failed, rolled back: %s", _what(e))
    if _is_storage_fault(e):
        return refusals.storage_unavailable("storage failed; the request was not recorded")
    return e


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in items:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _select(conn: sqlite3.Connection, tenant: str, hand_id: str) -> HandRecord | None:
    row = conn.execute(f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
    if row is None or row[1] != tenant:
        return None
    return hand_record(row)


def create_database(path: Path, meta: dict[str, str]) -> None:
    """A new, empty database at ``path`` with ``meta`` recorded; refuses one that is there.

    Only ``fairdeck init`` and ``serve`` on a fresh data dir call it: a database
    is an identity, never made again because a file went missing.
    """
    if path.exists() and path.stat().st_size > 0:
        raise StartupRefused(f"database {path} already exists; fairdeck never replaces one")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.executescript(SCHEMA)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO fairdeck_meta (name, value) VALUES (?, ?)", sorted(meta.items()))
        conn.execute("COMMIT")
    finally:
        conn.close()


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
        raise _unreadable(path, e) from None
    try:
        count = conn.execute("SELECT COUNT(*) FROM log_entries").fetchone()[0]
        notes = [bytes(r[0]) for r in conn.execute("SELECT note FROM checkpoints ORDER BY size")]
        rows = conn.execute("SELECT idx, entry FROM log_entries ORDER BY idx")
    except sqlite3.Error as e:
        conn.close()
        raise _unreadable(path, e) from None

    def entries() -> Iterator[bytes]:
        try:
            yield from entries_in_order(rows)
        except sqlite3.Error as e:
            raise _unreadable(path, e) from None
        finally:
            conn.close()

    return count, notes, entries()


def _unreadable(path: Path, error: sqlite3.Error) -> LogUnreadable:
    # sqlite's own words ("file is not a database", "database disk image is malformed",
    # "no such table: log_entries") say which of corrupt or foreign it is.
    return LogUnreadable(
        f"cannot read the dealer database {path}: {error}; restore it from a backup, "
        "or audit the live dealer with --target"
    )
