"""``SqliteStorage``: the Storage interface on one SQLite file (the embedded default).

It glues the engine's parts: writes, and reads of the writer's state (the log's size and head),
run on the writer thread (batches.SqliteWriter, SQL in writer.py), group-committed there; every
other read runs on the reader thread (batches.SqliteReader, SQL in reader.py), on a connection of
its own, and sees every write acknowledged before it was asked for. No SQL here.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from fairdeck.log import merkle
from fairdeck_server import refusals
from fairdeck_server.refusals import RESTORE, StartupRefused
from fairdeck_server.storage.base import (
    Change,
    Created,
    HandBatch,
    HandRecord,
    NewHand,
    Storage,
    StoredCheckpoint,
    TokenRecord,
    WriterStats,
)
from fairdeck_server.storage.sqlite import reader, writer
from fairdeck_server.storage.sqlite.batches import CLOSE_TIMEOUT_S, REFUSED, SqliteReader, SqliteWriter
from fairdeck_server.storage.sqlite.diagnosis import explain, kind
from fairdeck_server.storage.sqlite.writer import Rows

T = TypeVar("T")


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
        (batches.SqliteWriter)."""
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

    # -- writes, on the writer thread -----------------------------------------------------------

    async def create_hands(self, hands: Sequence[NewHand]) -> list[Created]:
        tail = self._writer.tail
        plain = all(new.record.request_id is None for new in hands)
        return await self._writer.submit(
            lambda conn: writer.create_many(conn, tail, hands),
            cost=len(hands),
            rows=(lambda rows: writer.create_rows(None, tail, hands, rows)) if plain else None,
        )

    async def create_batch(self, batch: HandBatch) -> int:
        tail = self._writer.tail

        def alone(conn: sqlite3.Connection) -> int:
            rows = Rows()
            base = writer.batch_rows(tail, batch, rows)
            rows.write(conn)
            return base

        return await self._writer.submit(
            alone, cost=len(batch), rows=lambda rows: writer.batch_rows(tail, batch, rows)
        )

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        tail = self._writer.tail
        return await self._writer.submit(lambda conn: writer.update_hand(conn, tail, tenant, hand_id, decide))

    async def update_hands(
        self, tenant: str, hand_ids: Sequence[str], decide: Callable[[HandRecord], tuple[Change, Any]]
    ) -> list[HandRecord | refusals.DealerError]:
        tail, ids = self._writer.tail, list(hand_ids)
        return await self._writer.submit(
            lambda conn: writer.update_hands(conn, tail, tenant, ids, decide), cost=len(ids)
        )

    async def log_size(self) -> int:
        return await self._writer.submit(lambda conn: self._writer.tail.size)

    async def log_head(self) -> tuple[int, bytes]:
        """(size, root) of the log as durably stored now."""
        tail = self._writer.tail
        return await self._writer.submit(
            lambda conn: (tail.size, merkle.tree_hash(tail.size, reader.hash_reader(conn)))
        )

    async def put_checkpoint(self, size: int, root: bytes, note: bytes, time_ms: int) -> StoredCheckpoint:
        """Store a signed checkpoint if it moves the head forward (compare-and-swap).

        Returns the head afterwards. A checkpoint for a size already signed is
        never replaced; one with a different root there, or a root that is not
        the stored tree's, raises LogForkError and is not stored.
        """
        tail = self._writer.tail
        return await self._writer.submit(
            lambda conn: writer.put_checkpoint(conn, tail, size, root, note, time_ms)
        )

    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        return await self._writer.submit(lambda conn: writer.add_cosignatures(conn, size, lines))

    async def put_token(self, token: TokenRecord) -> None:
        await self._writer.submit(lambda conn: writer.put_token(conn, token))

    async def revoke_token(self, token_id: str, when_ms: int) -> TokenRecord | None:
        return await self._writer.submit(lambda conn: writer.revoke_token(conn, token_id, when_ms))

    async def set_meta(self, name: str, expected: str | None, value: str) -> bool:
        """Set ``name`` to ``value`` if it is still ``expected`` (None: unset); False if it was not."""
        return await self._writer.submit(lambda conn: writer.set_meta(conn, name, expected, value))

    # -- reads, on the reader thread ------------------------------------------------------------

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        return await self._reader.submit(lambda conn: reader.select_hand(conn, tenant, hand_id))

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
        return await self._reader.submit(lambda conn: reader.stale_hands(conn, created_before_ms, limit))

    async def log_entries(self, start: int, end: int) -> list[bytes]:
        return await self._reader.submit(lambda conn: reader.log_entries(conn, start, end))

    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None:
        """The signed checkpoint at ``size``, or the latest one; None if there is none."""
        return await self._reader.submit(lambda conn: reader.checkpoint(conn, size))

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        return await self._reader.submit(lambda conn: reader.inclusion_proof(conn, index, size))

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return await self._reader.submit(lambda conn: reader.consistency_proof(conn, size1, size2))

    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
        return await self._reader.submit(lambda conn: reader.entry_index(conn, hand_id, reveal))

    async def open_hands(self, tenant: str | None = None) -> int:
        return await self._reader.submit(lambda conn: reader.open_hands(conn, tenant))

    async def get_token(self, token_id: str) -> TokenRecord | None:
        return await self._reader.submit(lambda conn: reader.get_token(conn, token_id))

    async def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        return await self._reader.submit(lambda conn: reader.list_tokens(conn, tenant))

    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]:
        """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal)."""
        return await self._reader.submit(reader.sealed_seed_samples)

    async def get_meta(self, name: str) -> str | None:
        return await self._reader.submit(lambda conn: reader.get_meta(conn, name))

    # -- health -----------------------------------------------------------------------------------

    async def probe(self) -> None:
        """One row rewritten and committed like any batch (same lock, WAL append and fsync), so it
        fails when a write would (locked, read-only, full, I/O error) without a line in the log for
        each probe: health says what changed. On a connection of its own, so that it does not wait
        behind queued work; but with ``serve --processes N`` in a batch of the writer, since a
        connection of its own would pass the writers' lock (held by a stopped worker, writes fail
        while such a probe succeeds)."""
        try:
            if self._writer.shared:
                await self._writer.submit(writer.probe_write, quiet=True)
            else:
                await asyncio.to_thread(writer.probe_file, self._path)
        except sqlite3.Error as e:
            self._writer.last_fault = e
            raise refusals.storage_unavailable(
                f"storage failed ({kind(self._path, e)}); the request was not recorded"
            ) from None

    def serving(self) -> None:
        self._writer.quiet = self._reader.quiet = False

    def diagnose(self) -> str | None:
        """The last storage failure in one line, with its fix (diagnosis.explain); None if none."""
        fault = self._writer.last_fault
        return None if fault is None else explain(self._path, fault)
