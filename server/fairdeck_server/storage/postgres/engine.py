"""The PostgreSQL engine: ``PostgresStorage``, the Storage interface on one database
shared by any number of dealer replicas.

It holds the connections (a pool for reads, tokens and checkpoints, and one
connection of the writer's own), starts the schema (schema.py) and checks the
log at start, and answers reads here. Writes, group-committed, go to the writer
(writer.py). Nothing here logs or raises a seed, a token or a connection
password: PostgreSQL's own messages are replaced by their SQLSTATE.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from fairdeck.log import merkle
from fairdeck.log.cosignature import add_cosignatures
from fairdeck_server import refusals
from fairdeck_server.storage.base import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    Change,
    Created,
    HandBatch,
    HandRecord,
    LogForkError,
    NewHand,
    StoredCheckpoint,
    TokenRecord,
    _Frontier,
    hand_record,
    token_record,
    token_row,
)
from fairdeck_server.storage.postgres.schema import ensure_schema
from fairdeck_server.storage.postgres.writer import Create, CreateBatch, Update, UpdateMany, Writer, what

T = TypeVar("T")
log = logging.getLogger(__name__)

IDLE_IN_TRANSACTION_MS = 10_000
"""A session idle inside a transaction this long (ms) is ended by PostgreSQL, releasing its locks."""
CHECKPOINT_LOCK = 0x6664_6B02
"""pg_advisory_xact_lock key serialising checkpoint compare-and-swap (appends do not take it)."""
LOCK_TIMEOUT_MS = 10_000
"""A statement waiting this long (ms) for a lock fails (UNAVAILABLE, not recorded) instead of
hanging the writer behind an operator's LOCK TABLE or a stuck DDL while health says SERVING."""
STATEMENT_TIMEOUT_MS = 60_000
"""A statement running this long (ms) is cancelled by the server."""


class PostgresStorage:
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
        self._where = _describe(url)
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
        self.stats = self._writer.stats

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
                await _check_log(conn)
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

    # -- reads ------------------------------------------------------------------------------------

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        row = await self._one(
            f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = %s AND tenant = %s",  # noqa: S608
            (hand_id, tenant),
        )
        return None if row is None else hand_record(row)

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
        rows = await self._all(
            # state <> 3 spelled as in the partial index, so the index serves the query
            "SELECT tenant, hand_id, created_ms FROM hands WHERE state <> 3 AND created_ms < %s "
            "ORDER BY created_ms LIMIT %s",
            (created_before_ms, limit),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    async def log_size(self) -> int:
        row = await self._one("SELECT size FROM log_head WHERE id = 1", ())
        return 0 if row is None else int(row[0])

    async def log_entries(self, start: int, end: int) -> list[bytes]:
        rows = await self._all(
            "SELECT entry FROM log_entries WHERE idx >= %s AND idx < %s ORDER BY idx", (start, end)
        )
        return [bytes(r[0]) for r in rows]

    async def log_head(self) -> tuple[int, bytes]:
        """(size, root) of the log as committed now: one row, the root folded from its frontier."""
        row = await self._one("SELECT size, frontier FROM log_head WHERE id = 1", ())
        if row is None:
            return 0, merkle.EMPTY_ROOT
        return int(row[0]), _Frontier.parse(int(row[0]), bytes(row[1])).root()

    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None:
        if size is None:
            row = await self._one("SELECT size, root, note FROM checkpoints ORDER BY size DESC LIMIT 1", ())
        else:
            row = await self._one("SELECT size, root, note FROM checkpoints WHERE size = %s", (size,))
        return None if row is None else StoredCheckpoint(int(row[0]), bytes(row[1]), bytes(row[2]))

    async def put_checkpoint(self, size: int, root: bytes, note: bytes, time_ms: int) -> StoredCheckpoint:
        """Store a signed checkpoint if it moves the head forward (compare-and-swap).

        Returns the head afterwards. A checkpoint for a size already signed is
        never replaced; one with a different root there, or a root that is not
        the stored tree's, raises LogForkError and is not stored. Publishers on
        several replicas are serialised by an advisory lock (not the log lock,
        so appends go on), and the primary key on size backs the rule up.
        """
        async with self._guard("store a checkpoint"), self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHECKPOINT_LOCK,))
            cur = await conn.execute(
                "SELECT size, root, note FROM checkpoints WHERE size = %s", (size,), binary=True
            )
            same = await cur.fetchone()
            if same is not None:
                if not hmac.compare_digest(bytes(same[1]), root):
                    raise LogForkError(f"a different root is already signed for tree size {size}")
                return StoredCheckpoint(int(same[0]), bytes(same[1]), bytes(same[2]))
            cur = await conn.execute("SELECT size FROM log_head WHERE id = 1")
            head_row = await cur.fetchone()
            log_size = 0 if head_row is None else int(head_row[0])
            if size > log_size or not hmac.compare_digest(await _tree_hash(conn, size), root):
                raise LogForkError(f"checkpoint root for size {size} is not the stored tree's")
            cur = await conn.execute(
                "SELECT size, root, note FROM checkpoints ORDER BY size DESC LIMIT 1", binary=True
            )
            head = await cur.fetchone()
            if head is not None and int(head[0]) > size:
                return StoredCheckpoint(int(head[0]), bytes(head[1]), bytes(head[2]))
            await conn.execute(
                "INSERT INTO checkpoints (size, root, note, time_ms) VALUES (%s, %s, %s, %s)",
                (size, root, note, time_ms),
            )
            return StoredCheckpoint(size, root, note)

    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        async with self._guard("store cosignatures"), self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHECKPOINT_LOCK,))
            cur = await conn.execute(
                "SELECT root, note FROM checkpoints WHERE size = %s", (size,), binary=True
            )
            row = await cur.fetchone()
            if row is None:
                return None
            note = add_cosignatures(bytes(row[1]), lines)
            if note != bytes(row[1]):
                await conn.execute("UPDATE checkpoints SET note = %s WHERE size = %s", (note, size))
            return StoredCheckpoint(size, bytes(row[0]), note)

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        async with self._guard("read the log"), self._pool.connection() as conn:
            return await _with_hashes(conn, lambda read: merkle.prove_inclusion(index, size, read))

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        async with self._guard("read the log"), self._pool.connection() as conn:
            return await _with_hashes(conn, lambda read: merkle.prove_consistency(size1, size2, read))

    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
        column = "reveal_index" if reveal else "commit_index"
        row = await self._one(f"SELECT {column} FROM hands WHERE hand_id = %s", (hand_id,))  # noqa: S608
        return None if row is None or row[0] is None else int(row[0])

    async def open_hands(self, tenant: str | None = None) -> int:
        if tenant is None:
            row = await self._one("SELECT count(*) FROM hands WHERE state <> 3", ())
        else:
            row = await self._one("SELECT count(*) FROM hands WHERE state <> 3 AND tenant = %s", (tenant,))
        return 0 if row is None else int(row[0])

    # -- tokens -----------------------------------------------------------------------------------

    async def put_token(self, token: TokenRecord) -> None:
        async with self._guard("store a token"), self._pool.connection() as conn:
            try:
                await conn.execute(
                    f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",  # noqa: S608
                    token_row(token),
                )
            except psycopg.errors.UniqueViolation:
                raise ValueError(f"token {token.token_id} already exists") from None

    async def get_token(self, token_id: str) -> TokenRecord | None:
        row = await self._one(
            f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = %s",  # noqa: S608
            (token_id,),
        )
        return None if row is None else token_record(row)

    async def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        query = f"SELECT {TOKEN_COLUMNS} FROM tokens"  # noqa: S608
        if tenant is None:
            rows = await self._all(query + " ORDER BY created_ms, token_id", ())
        else:
            rows = await self._all(query + " WHERE tenant = %s ORDER BY created_ms, token_id", (tenant,))
        return [token_record(r) for r in rows]

    async def revoke_token(self, token_id: str, when_ms: int) -> TokenRecord | None:
        async with self._guard("revoke a token"), self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "UPDATE tokens SET revoked_ms = %s WHERE token_id = %s AND revoked_ms IS NULL",
                (when_ms, token_id),
            )
            cur = await conn.execute(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = %s",  # noqa: S608
                (token_id,),
                binary=True,
            )
            row = await cur.fetchone()
        return None if row is None else token_record(row)

    # -- start-up checks of the log's identity (fairdeck_server.run.startup) --------------------------

    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]:
        """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal)."""
        rows = await self._all(
            "SELECT DISTINCT ON (substring(sealed_seed FROM 2 FOR 4)) hand_id, sealed_seed FROM hands "
            "WHERE state <> 3 ORDER BY substring(sealed_seed FROM 2 FOR 4), hand_id",
            (),
        )
        return [(str(r[0]), bytes(r[1])) for r in rows]

    async def get_meta(self, name: str) -> str | None:
        row = await self._one("SELECT value FROM fairdeck_meta WHERE name = %s", (name,))
        return None if row is None else str(row[0])

    async def set_meta(self, name: str, expected: str | None, value: str) -> bool:
        """Set ``name`` to ``value`` if it is still ``expected`` (None: unset); False if another
        replica changed it first (compare-and-swap, so two replicas cannot both win)."""
        if expected is None:
            query = "INSERT INTO fairdeck_meta (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"
            params: tuple[Any, ...] = (name, value)
        else:
            query = "UPDATE fairdeck_meta SET value = %s WHERE name = %s AND value = %s"
            params = (value, name, expected)
        async with self._guard("record the log key"), self._pool.connection() as conn:
            cur = await conn.execute(query, params)
            return cur.rowcount == 1

    async def probe(self) -> None:
        """A transaction that takes a transaction id, so its COMMIT is a WAL record flushed
        to disk (it fails when the server cannot write), with an UPDATE that matches no row,
        so it is refused in a read-only transaction (a standby, default_transaction_read_only).
        No DDL, no row locked: it never waits for the dealers' own writes."""
        async with self._guard("write a probe"), self._pool.connection() as conn, conn.transaction():
            await conn.execute("UPDATE tokens SET revoked_ms = revoked_ms WHERE false")
            await conn.execute("SELECT txid_current()")

    def diagnose(self) -> str | None:
        return None  # PostgreSQL's own message (in the refusal) names the cause

    def serving(self) -> None:
        return None

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

    async def _one(self, query: str, params: tuple[Any, ...]) -> TupleRow | None:
        async with self._guard("read"), self._pool.connection() as conn:
            cur = await conn.execute(query, params, binary=True)
            return await cur.fetchone()

    async def _all(self, query: str, params: tuple[Any, ...]) -> list[TupleRow]:
        async with self._guard("read"), self._pool.connection() as conn:
            cur = await conn.execute(query, params, binary=True)
            return await cur.fetchall()


def _describe(url: str) -> str:
    """host:port/dbname of a URL, never its password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "the configured URL"
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


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


async def _check_log(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """At start: the head row agrees with the entries and with the stored hashes."""
    cur = await conn.execute(
        "SELECT size, frontier, (SELECT COALESCE(MAX(idx) + 1, 0) FROM log_entries) "
        "FROM log_head WHERE id = 1",
        binary=True,
    )
    row = await cur.fetchone()
    if row is None:
        raise refusals.storage_unavailable("the log head row is missing: the log is damaged")
    size, blob, entries = int(row[0]), bytes(row[1]), int(row[2])
    if entries != size:
        raise refusals.storage_unavailable(f"the log head says {size} entries, the table holds {entries}")
    frontier = _Frontier.parse(size, blob)
    stored = await _read_hashes(conn, [index for _, index, _ in frontier.stack])
    if [stored.get(index) for _, index, _ in frontier.stack] != [h for _, _, h in frontier.stack]:
        raise refusals.storage_unavailable("the log head's frontier differs from the stored hashes")


async def _read_hashes(conn: psycopg.AsyncConnection[TupleRow], indexes: list[int]) -> dict[int, bytes]:
    if not indexes:
        return {}
    cur = await conn.execute(
        "SELECT idx, hash FROM log_hashes WHERE idx = ANY(%s::bigint[])",
        (indexes,),
        binary=True,
        prepare=True,
    )
    return {int(r[0]): bytes(r[1]) for r in await cur.fetchall()}


async def _with_hashes(
    conn: psycopg.AsyncConnection[TupleRow], compute: Callable[[merkle.HashReader], T]
) -> T:
    """Run a ``fairdeck.log.merkle`` computation whose reads are synchronous: once to
    learn which hashes it reads (they depend only on the sizes), then with them."""
    wanted: list[int] = []

    def record(indexes: list[int]) -> list[bytes]:
        wanted.extend(indexes)
        return [bytes(merkle.HASH_SIZE)] * len(indexes)

    compute(record)
    hashes = await _read_hashes(conn, wanted)

    def read(indexes: list[int]) -> list[bytes]:
        try:
            return [hashes[i] for i in indexes]
        except KeyError:
            raise refusals.storage_unavailable("a stored hash of the log is missing") from None

    return compute(read)


async def _tree_hash(conn: psycopg.AsyncConnection[TupleRow], size: int) -> bytes:
    return await _with_hashes(conn, lambda read: merkle.tree_hash(size, read))
