"""``SqliteStorage``: the Storage interface on one SQLite file (the embedded default).

Writes, and reads of the writer's state (the log's size and head), run on the writer thread
(writer.py), group-committed there; every other read runs on the reader thread (reader.py), on
a connection of its own, and sees every write acknowledged before it was asked for.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from fairdeck.log import merkle
from fairdeck.log.cosignature import add_cosignatures
from fairdeck_server import refusals
from fairdeck_server.refusals import RESTORE, StartupRefused
from fairdeck_server.storage.base import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    Change,
    Created,
    HandBatch,
    HandRecord,
    LogForkError,
    NewHand,
    Storage,
    StoredCheckpoint,
    TokenRecord,
    WriterStats,
    batch_hand_rows,
    encode_seeds,
    hand_record,
    token_record,
    token_row,
)
from fairdeck_server.storage.sqlite.diagnosis import explain, kind
from fairdeck_server.storage.sqlite.reader import SqliteReader
from fairdeck_server.storage.sqlite.schema import probe_file, probe_write
from fairdeck_server.storage.sqlite.writer import CLOSE_TIMEOUT_S, REFUSED, Rows, SqliteWriter, hash_reader

T = TypeVar("T")
OPEN_HANDS_OF_TENANT = "SELECT COUNT(*) FROM hands WHERE state != 3 AND tenant = ?"
"""A tenant's open hands (its cap): served by the partial index hands_open_tenant, so it reads
that tenant's open hands only, however many other tenants hold."""

_UPDATE = (
    "UPDATE hands SET client_seeds = ?, state = ?, dealt = ?, closed_ms = ?, server_seed = ?, "
    "reveal_index = ? WHERE hand_id = ?"
)


class SqliteStorage(Storage):
    """Storage on one SQLite file, written by one thread with group commit."""

    def __init__(
        self,
        path: Path,
        *,
        create: bool = True,
        writer_lock: Path | None = None,
        writer_lock_fd: int | None = None,
    ) -> None:
        """``create``: make the file and its tables if missing. Without it, a missing,
        empty or table-less file is refused (StartupRefused) and nothing is written.
        ``writer_lock`` (``writer_lock_fd``): other processes write this database too
        (writer.SqliteWriter)."""
        self._path = path
        self._create = create
        self._writer = SqliteWriter(
            path, create=create, writer_lock=writer_lock, writer_lock_fd=writer_lock_fd
        )
        self._reader = SqliteReader(path, REFUSED, on_fault=self._writer.fault)

    @property
    def stats(self) -> WriterStats:
        return self._writer.stats

    async def start(self) -> None:
        if self._create:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        elif not self._path.is_file() or self._path.stat().st_size == 0:
            raise StartupRefused(
                f"no database at {self._path} ({'empty file' if self._path.is_file() else 'missing'}): "
                f"{RESTORE}; or, for a new log, create a new data dir with `fairdeck init`"
            )
        await self._writer.start()
        try:
            await self._reader.start()
        except BaseException:
            await self._writer.close()
            raise

    async def close(self) -> None:
        await self._reader.close(CLOSE_TIMEOUT_S)
        await self._writer.close()

    def lock_held_for(self) -> float:
        """Seconds this process has held the writers' lock in the batch under way (0: not held)."""
        return self._writer.lock_held_for()

    async def create_hands(self, hands: Sequence[NewHand]) -> list[Created]:
        writer = self._writer
        plain = all(new.record.request_id is None for new in hands)
        return await writer.submit(
            lambda conn: writer.create_many(conn, hands),
            cost=len(hands),
            rows=(lambda rows: writer.create_rows(None, hands, rows)) if plain else None,
        )

    async def create_batch(self, batch: HandBatch) -> int:
        writer = self._writer

        def alone(conn: sqlite3.Connection) -> int:
            rows = Rows()
            base = batch_rows(writer, batch, rows)
            rows.write(conn)
            return base

        return await writer.submit(alone, cost=len(batch), rows=lambda rows: batch_rows(writer, batch, rows))

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        return await self._reader.submit(lambda conn: select_hand(conn, tenant, hand_id))

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        def op(conn: sqlite3.Connection) -> tuple[HandRecord, T]:
            current = select_hand(conn, tenant, hand_id)
            if current is None:
                raise refusals.hand_not_found()
            change, result = decide(current)
            new = change.record
            if change.log_entry is not None:
                rows = Rows()
                new = replace(new, reveal_index=self._writer.append(change.log_entry, rows))
                rows.write(conn)
            if new == current:
                return new, result
            conn.execute(_UPDATE, _update_row(new))
            return new, result

        return await self._writer.submit(op)

    async def update_hands(
        self, tenant: str, hand_ids: Sequence[str], decide: Callable[[HandRecord], tuple[Change, Any]]
    ) -> list[HandRecord | refusals.DealerError]:
        writer = self._writer
        ids = list(hand_ids)

        def op(conn: sqlite3.Connection) -> list[HandRecord | refusals.DealerError]:
            marks = ",".join("?" * len(ids))  # placeholders only; the values are bound
            query = f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id IN ({marks})"  # noqa: S608
            found = {row[0]: row for row in conn.execute(query, ids) if row[1] == tenant}
            rows, updates = Rows(), []
            out: list[HandRecord | refusals.DealerError] = []
            for hand_id in ids:
                row = found.get(hand_id)
                try:
                    if row is None:
                        raise refusals.hand_not_found()
                    current = hand_record(row)
                    change, _ = decide(current)
                except refusals.DealerError as e:  # it wrote nothing: the others go on
                    out.append(e)
                    continue
                new = change.record
                if change.log_entry is not None:
                    new = replace(new, reveal_index=writer.append(change.log_entry, rows))
                if new != current:
                    updates.append(_update_row(new))
                out.append(new)
            rows.write(conn)
            conn.executemany(_UPDATE, updates)
            return out

        return await writer.submit(op, cost=len(ids))

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
        def op(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
            rows = conn.execute(
                # state != 3 spelled as in the partial index, so the index serves the query
                "SELECT tenant, hand_id, created_ms FROM hands WHERE state != 3 AND created_ms < ? "
                "ORDER BY created_ms LIMIT ?",
                (created_before_ms, limit),
            ).fetchall()
            return [(r[0], r[1], int(r[2])) for r in rows]

        return await self._reader.submit(op)

    async def log_size(self) -> int:
        return await self._writer.submit(lambda conn: self._writer.log_size)

    async def log_entries(self, start: int, end: int) -> list[bytes]:
        def op(conn: sqlite3.Connection) -> list[bytes]:
            rows = conn.execute(
                "SELECT entry FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, end)
            ).fetchall()
            return [bytes(r[0]) for r in rows]

        return await self._reader.submit(op)

    async def log_head(self) -> tuple[int, bytes]:
        """(size, root) of the log as durably stored now."""
        return await self._writer.submit(
            lambda conn: (self._writer.log_size, merkle.tree_hash(self._writer.log_size, hash_reader(conn)))
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

        return await self._reader.submit(op)

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
            if size > self._writer.log_size or merkle.tree_hash(size, hash_reader(conn)) != root:
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

        return await self._writer.submit(op)

    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        def op(conn: sqlite3.Connection) -> StoredCheckpoint | None:
            row = conn.execute("SELECT root, note FROM checkpoints WHERE size = ?", (size,)).fetchone()
            if row is None:
                return None
            note = add_cosignatures(bytes(row[1]), lines)
            if note != bytes(row[1]):
                conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))
            return StoredCheckpoint(size, bytes(row[0]), note)

        return await self._writer.submit(op)

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        return await self._reader.submit(lambda conn: merkle.prove_inclusion(index, size, hash_reader(conn)))

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return await self._reader.submit(
            lambda conn: merkle.prove_consistency(size1, size2, hash_reader(conn))
        )

    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
        column = "reveal_index" if reveal else "commit_index"

        def op(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(f"SELECT {column} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
            return None if row is None else row[0]

        return await self._reader.submit(op)

    async def open_hands(self, tenant: str | None = None) -> int:
        def op(conn: sqlite3.Connection) -> int:
            if tenant is None:
                row = conn.execute("SELECT COUNT(*) FROM hands WHERE state != 3").fetchone()
            else:
                row = conn.execute(OPEN_HANDS_OF_TENANT, (tenant,)).fetchone()
            return int(row[0])

        return await self._reader.submit(op)

    async def put_token(self, token: TokenRecord) -> None:
        def op(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                    token_row(token),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"token {token.token_id} already exists") from None

        await self._writer.submit(op)

    async def get_token(self, token_id: str) -> TokenRecord | None:
        def op(conn: sqlite3.Connection) -> TokenRecord | None:
            row = conn.execute(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?",  # noqa: S608
                (token_id,),
            ).fetchone()
            return None if row is None else token_record(row)

        return await self._reader.submit(op)

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

        return await self._reader.submit(op)

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

        return await self._writer.submit(op)

    async def probe(self) -> None:
        """One row rewritten and committed like any batch (same lock, WAL append and fsync), so it
        fails when a write would (locked, read-only, full, I/O error) without a line in the log for
        each probe: health says what changed. On a connection of its own, so that it does not wait
        behind queued work; but with ``serve --processes N`` in a batch of the writer, since a
        connection of its own would pass the writers' lock (held by a stopped worker, writes fail
        while such a probe succeeds)."""
        try:
            if self._writer.shared:
                await self._writer.submit(probe_write, quiet=True)
            else:
                await asyncio.to_thread(probe_file, self._path)
        except sqlite3.Error as e:
            self._writer.last_fault = e
            raise refusals.storage_unavailable(
                f"storage failed ({kind(self._path, e)}); the request was not recorded"
            ) from None

    def serving(self) -> None:
        self._writer.quiet = self._reader.quiet = False

    def diagnose(self) -> str | None:
        """The last storage failure in one line, with its fix (faults.explain); None if none."""
        fault = self._writer.last_fault
        return None if fault is None else explain(self._path, fault)

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

        return await self._reader.submit(op)

    async def get_meta(self, name: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT value FROM fairdeck_meta WHERE name = ?", (name,)).fetchone()
            return None if row is None else str(row[0])

        return await self._reader.submit(op)

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

        return await self._writer.submit(op)


def batch_rows(writer: SqliteWriter, batch: HandBatch, rows: Rows) -> int:
    """Give a batch of hands its log indexes and queue its rows; the index of its first entry."""
    base = writer.log_size
    for entry in batch.entries:
        writer.append(entry, rows)
    rows.hands.extend(batch_hand_rows(batch, base))
    return base


def _update_row(new: HandRecord) -> tuple[Any, ...]:
    """The values of ``_UPDATE`` for a changed hand."""
    return (
        encode_seeds(new.client_seeds),
        int(new.state),
        new.dealt,
        new.closed_ms,
        new.server_seed,
        new.reveal_index,
        new.hand_id,
    )


def select_hand(conn: sqlite3.Connection, tenant: str, hand_id: str) -> HandRecord | None:
    row = conn.execute(f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
    if row is None or row[1] != tenant:
        return None
    return hand_record(row)
