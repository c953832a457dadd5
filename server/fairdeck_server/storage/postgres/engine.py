"""The PostgreSQL engine: ``PostgresStorage``, the Storage interface on one database
shared by any number of dealer replicas.

It glues the engine's parts: it holds the connections (a pool for reads, tokens and checkpoints,
and one connection of the writer's own), starts the schema (schema.py) and checks the log at start
(reader.check_log). Reads (reader.py) and the writes a pool connection runs alone (writer.py) run
here, each on a pool connection; hand writes, group-committed, go to the writer (batches.py). No
SQL here. Nothing here logs or raises a seed, a token or a connection password: PostgreSQL's own
messages are replaced by their SQLSTATE (diagnosis.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from fairdeck_server import refusals
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
from fairdeck_server.storage.postgres import reader, writer
from fairdeck_server.storage.postgres.batches import Create, CreateBatch, Update, UpdateMany, Writer
from fairdeck_server.storage.postgres.diagnosis import describe, what
from fairdeck_server.storage.postgres.schema import ensure_schema
from fairdeck_server.storage.rows import token_record

T = TypeVar("T")
log = logging.getLogger(__name__)
Connection = psycopg.AsyncConnection[TupleRow]

IDLE_IN_TRANSACTION_MS = 10_000
"""A session idle inside a transaction this long (ms) is ended by PostgreSQL, releasing its locks."""
LOCK_TIMEOUT_MS = 10_000
"""A statement waiting this long (ms) for a lock fails (UNAVAILABLE, not recorded) instead of
hanging the writer behind an operator's LOCK TABLE or a stuck DDL while health says SERVING."""
STATEMENT_TIMEOUT_MS = 60_000
"""A statement running this long (ms) is cancelled by the server."""


class PostgresStorage(Storage):
    """Storage on one PostgreSQL database, shareable by several dealer replicas.

    Each replica holds up to ``max_size`` connections: one the writer keeps for
    itself, and ``max_size - 1`` for reads, tokens and checkpoints. Replicas
    times ``max_size`` must stay under the server's max_connections.
    ``stats`` counts what the writer did (batches, appends, lock wait).
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 2,
        max_size: int = 8,
        connect_timeout: float = 10.0,
    ) -> None:
        self._where = describe(url)
        self._connect_timeout = connect_timeout
        if max_size < 2:
            raise ValueError("max_size must be at least 2: the writer's connection and one for reads")

        def pool(name: str, low: int, high: int) -> AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]:
            return AsyncConnectionPool(
                url,
                min_size=low,
                max_size=high,
                open=False,
                kwargs={"autocommit": True, "application_name": "fairdeck"},
                configure=_configure,
                name=name,
                timeout=connect_timeout,
            )

        # The writer has a connection of its own, so reads (however many, however slow)
        # can never keep a batch of acknowledged-to-be writes waiting for one.
        self._pool = pool("fairdeck", max(1, min(min_size, max_size) - 1), max_size - 1)
        self._write_pool = pool("fairdeck-writer", 1, 1)
        self._writer = Writer(self._write_pool)
        self._closed = False
        self._started = False
        self._opened = asyncio.Event()
        """Set when start() is over, well or not: calls made before then wait for it."""
        self._start_error: refusals.DealerError | None = None

    @property
    def stats(self) -> WriterStats:
        return self._writer.stats

    async def start(self) -> None:
        try:
            try:
                await self._pool.open(wait=True, timeout=self._connect_timeout)
                await self._write_pool.open(wait=True, timeout=self._connect_timeout)
            except psycopg.Error as e:
                raise refusals.storage_unavailable(
                    f"cannot connect to PostgreSQL at {self._where}: {what(e)}"
                ) from None
            async with self._guard("create the schema", starting=True), self._pool.connection() as conn:
                await ensure_schema(conn)
            async with self._guard("check the log", starting=True), self._pool.connection() as conn:
                await reader.check_log(conn)
        except BaseException as e:
            await self._pool.close()
            await self._write_pool.close()
            self._start_error = (
                e
                if isinstance(e, refusals.DealerError)
                else refusals.storage_unavailable("storage did not start")
            )
            self._opened.set()
            self._writer.fail_queued(self._start_error)
            raise
        self._started = True
        self._writer.start()
        self._opened.set()

    # -- writes, group-committed ---------------------------------------------------------------

    async def create_hands(self, hands: Sequence[NewHand]) -> list[Created]:
        if not hands:
            return []
        fut: asyncio.Future[list[Created]] = self._future()
        self._writer.enqueue(Create(hands, fut))
        return await fut

    async def create_batch(self, batch: HandBatch) -> int:
        fut: asyncio.Future[int] = self._future()
        self._writer.enqueue(CreateBatch(batch, fut))
        return await fut

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        fut: asyncio.Future[tuple[HandRecord, T]] = self._future()
        self._writer.enqueue(Update(tenant, hand_id, decide, fut))
        return await fut

    async def update_hands(
        self, tenant: str, hand_ids: Sequence[str], decide: Callable[[HandRecord], tuple[Change, Any]]
    ) -> list[HandRecord | refusals.DealerError]:
        parts = [Update(tenant, hand_id, decide, self._future()) for hand_id in hand_ids]
        self._writer.enqueue(UpdateMany(parts))
        out: list[HandRecord | refusals.DealerError] = []
        for outcome in await asyncio.gather(*(part.fut for part in parts), return_exceptions=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, refusals.DealerError):
                raise outcome
            out.append(outcome if isinstance(outcome, refusals.DealerError) else outcome[0])
        return out

    # -- reads, each on a pool connection --------------------------------------------------------

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        return await self._read(lambda conn: reader.get_hand(conn, tenant, hand_id))

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
        return await self._read(lambda conn: reader.stale_hands(conn, created_before_ms, limit))

    async def log_size(self) -> int:
        return await self._read(reader.stored_log_size)

    async def log_entries(self, start: int, end: int) -> list[bytes]:
        return await self._read(lambda conn: reader.log_entries(conn, start, end))

    async def log_head(self) -> tuple[int, bytes]:
        """(size, root) of the log as committed now: one row, the root folded from its frontier."""
        return await self._read(reader.log_head)

    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None:
        return await self._read(lambda conn: reader.checkpoint(conn, size))

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        return await self._read(lambda conn: reader.inclusion_proof(conn, index, size), "read the log")

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return await self._read(lambda conn: reader.consistency_proof(conn, size1, size2), "read the log")

    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
        return await self._read(lambda conn: reader.entry_index(conn, hand_id, reveal))

    async def open_hands(self, tenant: str | None = None) -> int:
        return await self._read(lambda conn: reader.open_hands(conn, tenant))

    async def get_token(self, token_id: str) -> TokenRecord | None:
        return await self._read(lambda conn: reader.get_token(conn, token_id))

    async def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        return await self._read(lambda conn: reader.list_tokens(conn, tenant))

    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]:
        """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal)."""
        return await self._read(reader.sealed_seed_samples)

    async def get_meta(self, name: str) -> str | None:
        return await self._read(lambda conn: reader.get_meta(conn, name))

    # -- writes a pool connection runs alone --------------------------------------------------------

    async def put_checkpoint(self, size: int, root: bytes, note: bytes, time_ms: int) -> StoredCheckpoint:
        """Store a signed checkpoint if it moves the head forward (compare-and-swap; writer.py)."""
        async with self._guard("store a checkpoint"), self._pool.connection() as conn, conn.transaction():
            return await writer.put_checkpoint(conn, size, root, note, time_ms)

    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        async with self._guard("store cosignatures"), self._pool.connection() as conn, conn.transaction():
            return await writer.add_cosignatures(conn, size, lines)

    async def put_token(self, token: TokenRecord) -> None:
        async with self._guard("store a token"), self._pool.connection() as conn:
            await writer.put_token(conn, token)

    async def revoke_token(self, token_id: str, when_ms: int) -> TokenRecord | None:
        async with self._guard("revoke a token"), self._pool.connection() as conn, conn.transaction():
            row = await writer.revoke_token(conn, token_id, when_ms)
        return None if row is None else token_record(row)

    async def set_meta(self, name: str, expected: str | None, value: str) -> bool:
        """Set ``name`` to ``value`` if it is still ``expected`` (None: unset); False if another
        replica changed it first (compare-and-swap, so two replicas cannot both win)."""
        async with self._guard("record the log key"), self._pool.connection() as conn:
            return await writer.set_meta(conn, name, expected, value)

    async def probe(self) -> None:
        """A write that fails when the server cannot write, or is read-only (writer.probe)."""
        async with self._guard("write a probe"), self._pool.connection() as conn, conn.transaction():
            await writer.probe(conn)

    def diagnose(self) -> str | None:
        return None  # PostgreSQL's own message (in the refusal) names the cause

    def serving(self) -> None:
        return None

    def lock_held_for(self) -> float:
        return 0.0  # replicas take turns on the log_head row, in the database: nothing held here

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._writer.close()  # it finishes what is queued first
        await self._pool.close()
        await self._write_pool.close()

    def _future(self) -> asyncio.Future[Any]:
        """A future for a queued write; queued before start(), it waits for the writer."""
        if self._closed:
            raise refusals.storage_unavailable("storage is closed")
        if self._start_error is not None:
            raise refusals.storage_unavailable(str(self._start_error))
        return asyncio.get_running_loop().create_future()

    # -- helpers ------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _guard(self, doing: str, *, starting: bool = False) -> AsyncIterator[None]:
        """Wait for start(); psycopg errors become STORAGE_UNAVAILABLE, without PostgreSQL's text."""
        if not (starting or self._started or self._closed):
            await self._opened.wait()
        if self._closed:
            raise refusals.storage_unavailable("storage is closed")
        if self._start_error is not None:
            raise refusals.storage_unavailable(str(self._start_error))
        try:
            yield
        except psycopg.Error as e:
            log.error("storage failed to %s: %s", doing, what(e))
            raise refusals.storage_unavailable(f"storage failed to {doing}") from None

    async def _read(self, read: Callable[[Connection], Awaitable[T]], doing: str = "read") -> T:
        """``read`` on a pool connection, once start() is over (``_guard``)."""
        async with self._guard(doing), self._pool.connection() as conn:
            return await read(conn)


async def _configure(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """Every connection commits durably (synchronous_commit is never off for us);
    a session stuck inside a transaction (a replica frozen between its two round
    trips, holding hand rows) is ended by the server instead of stalling other
    replicas' writers; and no statement waits for a lock or runs without end."""
    cur = await conn.execute("SHOW synchronous_commit")
    row = await cur.fetchone()
    if row is not None and row[0] == "off":
        await conn.execute("SET synchronous_commit = on")
    await conn.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
    await conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
    await conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
