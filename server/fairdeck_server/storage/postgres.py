"""The server engine: PostgreSQL, shared by any number of dealer replicas.

**One sequence, one tree.** Every append locks the single row of
``log_head`` (``SELECT ... FOR UPDATE``), which holds the tree size and its
frontier: the hashes of the complete subtrees on the tree's right edge,
O(log n) bytes. The lock is taken in the transaction that inserts the
entries, their stored hashes (Go sumdb layout, ``fairdeck.log.merkle``) and the
hand rows, and is held until COMMIT. An index, its hashes and its hand thus
commit together or not at all, replicas never hand out the same index, and a
replica needs no memory of the tree: the locked row tells it where the tree
ends and what an append must hash with. The locking and hashing run in the
database (``fairdeck_append``, PL/pgSQL), inside the statement that writes
the batch, so the lock is never held across a round trip to a replica or
while a replica's busy event loop gets round to answering.

**Group commit**, as in sqlite.py: operations queue up in the replica, and a
writer takes everything queued into one transaction, in two phases. The log
lock is taken last, after every row lock, so there is one lock order and no
deadlock between replicas:

1. Reads and row locks. Idempotent opens are looked up by request id (one
   query); the hands to update are locked ``FOR UPDATE`` in hand-id order
   (one query); ``decide`` runs on each. A refused operation fails alone and
   has written nothing.
2. One statement writes the whole batch: the append (log lock, hashes, head),
   then the entries and the hand rows at the indexes it gave out (writable
   CTEs over one JSON document). A batch that read nothing (plain opens) sends
   it alone, in autocommit mode: one statement, one transaction, one round
   trip. A batch that read sends it and COMMIT as one string. Either way
   nothing waits between the write and COMMIT. Futures resolve only after
   COMMIT returned; with ``synchronous_commit`` on, the WAL is flushed by then.

A second operation on a hand, or on a request id, already in the batch waits
for the next batch, so every ``decide`` sees a stored record. If the write
phase fails on a constraint (two replicas racing on one request id) or a
deadlock or serialization failure, the batch rolls back as a whole and each
operation runs again alone, so only the one at fault fails.

Nothing here logs or raises a seed, a token or a connection password:
PostgreSQL's own messages (which may quote key values) are replaced by their
SQLSTATE.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from fairdeck.log import merkle
from fairdeck_server import errors
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
    encode_seeds,
    entries_in_order,
    hand_record,
    token_record,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_BATCH = 512
"""Operations per group-commit transaction."""
RETRIES = 3
"""Times an operation alone is retried after a deadlock, serialization failure or lost race."""
SCHEMA_LOCK = 0x6664_6B01
"""pg_advisory_xact_lock key serialising schema creation by replicas starting together."""
IDLE_IN_TRANSACTION_MS = 10_000
"""A session idle inside a transaction this long (ms) is ended by PostgreSQL, releasing its locks."""
CHECKPOINT_LOCK = 0x6664_6B02
"""pg_advisory_xact_lock key serialising checkpoint compare-and-swap (appends do not take it)."""
LOCK_TIMEOUT_MS = 10_000
"""A statement waiting this long (ms) for a lock fails (UNAVAILABLE, not recorded) instead of
hanging the writer behind an operator's LOCK TABLE or a stuck DDL while health says SERVING."""
STATEMENT_TIMEOUT_MS = 60_000
"""A statement running this long (ms) is cancelled by the server."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS hands (
    hand_id      text PRIMARY KEY,
    tenant       text NOT NULL,
    request_id   text,
    deck         text NOT NULL,
    version      text NOT NULL,
    commitment   bytea NOT NULL,
    sealed_seed  bytea NOT NULL,   -- AES-256-GCM, never the plain seed
    client_seeds bytea NOT NULL,
    state        smallint NOT NULL,
    dealt        integer NOT NULL,
    created_ms   bigint NOT NULL,
    commit_index bigint NOT NULL,
    closed_ms    bigint,
    server_seed  bytea,            -- set only when revealed
    reveal_index bigint,
    request_fp   bytea             -- what the idempotent open asked for
);
CREATE UNIQUE INDEX IF NOT EXISTS hands_request ON hands (tenant, request_id)
    WHERE request_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS hands_unrevealed ON hands (created_ms) WHERE state <> 3;
CREATE INDEX IF NOT EXISTS hands_open_tenant ON hands (tenant) WHERE state <> 3;
CREATE TABLE IF NOT EXISTS log_entries (
    idx   bigint PRIMARY KEY,
    entry bytea NOT NULL
);
-- Merkle tree hashes in Go sumdb's stored-hash layout (fairdeck.log.merkle).
CREATE TABLE IF NOT EXISTS log_hashes (
    idx  bigint PRIMARY KEY,
    hash bytea NOT NULL
);
-- The one row every append locks: the tree size and its frontier (the
-- complete subtrees' hashes, largest first, 32 bytes each).
CREATE TABLE IF NOT EXISTS log_head (
    id       smallint PRIMARY KEY CHECK (id = 1),
    size     bigint NOT NULL,
    frontier bytea NOT NULL
);
INSERT INTO log_head (id, size, frontier) VALUES (1, 0, ''::bytea) ON CONFLICT (id) DO NOTHING;
-- Signed checkpoints; the head is the largest size. One row per size, ever.
CREATE TABLE IF NOT EXISTS checkpoints (
    size    bigint PRIMARY KEY,
    root    bytea NOT NULL,
    note    bytea NOT NULL,
    time_ms bigint NOT NULL
);
-- Which SCHEMA text created or last upgraded the database (SCHEMA_VERSION).
CREATE TABLE IF NOT EXISTS fairdeck_schema (
    id      smallint PRIMARY KEY CHECK (id = 1),
    version text NOT NULL
);
-- Facts about the log itself: 'log_key' is the verifier key (public) of the key that signs
-- it, recorded by the first replica that starts, so a replica with another key is refused.
CREATE TABLE IF NOT EXISTS fairdeck_meta (
    name  text PRIMARY KEY,
    value text NOT NULL
);
-- API tokens: only a digest of the secret part is stored.
CREATE TABLE IF NOT EXISTS tokens (
    token_id   text PRIMARY KEY,
    tenant     text NOT NULL,
    role       text NOT NULL,
    digest     bytea NOT NULL,
    created_ms bigint NOT NULL,
    label      text NOT NULL,
    revoked_ms bigint
);
-- The log's append, run in the database so that the log lock is held only
-- while the server works: it locks the head row, hashes the new leaves into the
-- stored-hash layout (fairdeck.log.merkle: a leaf's hash, then each subtree it
-- completes), inserts those hashes and moves the head. The caller inserts the
-- entries themselves, at base, base + 1, ... in the same statement.
CREATE OR REPLACE FUNCTION fairdeck_append(
    leaves bytea[], OUT base bigint, OUT waited_us bigint, OUT hashing_us bigint
) LANGUAGE plpgsql AS $fn$
DECLARE
    asked timestamptz := clock_timestamp();
    granted timestamptz;
    v_size bigint;
    v_blob bytea;
    levels int[] := '{}';
    edge bytea[] := '{}';
    next_idx bigint;
    out_idx bigint[] := '{}';
    out_hash bytea[] := '{}';
    h bytea;
    lvl int;
    top int := 0;
BEGIN
    SELECT size, frontier INTO v_size, v_blob FROM log_head WHERE id = 1 FOR UPDATE;
    granted := clock_timestamp();
    -- The frontier: one hash per set bit of the size, largest subtree first.
    FOR lvl IN REVERSE 62..0 LOOP
        IF (v_size >> lvl) & 1 = 1 THEN
            levels := levels || lvl;
            edge := edge || substring(v_blob FROM 32 * top + 1 FOR 32);
            top := top + 1;
        END IF;
    END LOOP;
    IF octet_length(v_blob) <> 32 * top THEN
        RAISE EXCEPTION 'log head frontier does not fit its size' USING ERRCODE = 'data_corrupted';
    END IF;
    next_idx := 2 * v_size - top;  -- hashes stored so far: 2n - popcount(n)
    FOREACH h IN ARRAY leaves LOOP
        out_idx := out_idx || next_idx;
        out_hash := out_hash || h;
        next_idx := next_idx + 1;
        lvl := 0;
        WHILE top > 0 AND levels[top] = lvl LOOP
            h := sha256(decode('01', 'hex') || edge[top] || h);  -- RFC 9162 interior node
            top := top - 1;
            out_idx := out_idx || next_idx;
            out_hash := out_hash || h;
            next_idx := next_idx + 1;
            lvl := lvl + 1;
        END LOOP;
        top := top + 1;
        levels[top] := lvl;
        edge[top] := h;
    END LOOP;
    INSERT INTO log_hashes (idx, hash) SELECT * FROM unnest(out_idx, out_hash);
    UPDATE log_head
    SET size = v_size + cardinality(leaves),
        frontier = (SELECT string_agg(edge[k], ''::bytea ORDER BY k) FROM generate_series(1, top) AS k)
    WHERE id = 1;
    base := v_size;
    waited_us := (extract(epoch FROM granted - asked) * 1e6)::bigint;
    hashing_us := (extract(epoch FROM clock_timestamp() - granted) * 1e6)::bigint;
END
$fn$;
"""
SCHEMA_VERSION = hashlib.sha256(SCHEMA.encode()).hexdigest()[:16]
"""Changes whenever SCHEMA does. A replica whose version is already recorded runs no DDL at
start: CREATE INDEX IF NOT EXISTS takes a lock on ``hands`` even when the index exists, which
would queue every other replica's writes behind it at each restart or scale-out."""

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
    # The leaf hashes are computed here, before fairdeck_append takes the lock.
    "a AS MATERIALIZED (SELECT * FROM fairdeck_append(ARRAY("
    "SELECT sha256(decode('00', 'hex') || decode(e.x, 'hex')) "
    "FROM doc, jsonb_array_elements_text(doc.d -> 'entries') WITH ORDINALITY AS e (x, o) ORDER BY e.o))), "
    "entries AS (INSERT INTO log_entries (idx, entry) SELECT a.base + e.o - 1, decode(e.x, 'hex') "
    "FROM a, doc, jsonb_array_elements_text(doc.d -> 'entries') WITH ORDINALITY AS e (x, o)), "
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

# -- the queued write operations ------------------------------------------------------------------


@dataclass(eq=False)
class _Create:
    hands: Sequence[NewHand]
    fut: asyncio.Future[Any]


@dataclass(eq=False)
class _Update:
    tenant: str
    hand_id: str
    decide: Callable[[HandRecord], tuple[Change, Any]]
    fut: asyncio.Future[Any]


_Op = _Create | _Update


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
    results: list[tuple[_Op, Callable[[int], Any]]] = field(default_factory=list)
    """Each operation that succeeded, and its result as a function of the tree size before the batch."""
    failed: list[tuple[_Op, BaseException]] = field(default_factory=list)
    deferred: list[_Op] = field(default_factory=list)

    def append(self, entry: bytes) -> int:
        self.entries.append(entry)
        return len(self.entries) - 1


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
        self._writer_task: asyncio.Task[None] | None = None
        self._queue: collections.deque[_Op] = collections.deque()
        self._wakeup = asyncio.Event()
        self._closed = False
        self._started = False
        self._opened = asyncio.Event()
        """Set when start() is over, well or not: calls made before then wait for it."""
        self._start_error: errors.DealerError | None = None
        self.stats = WriterStats(lock_wait_seconds=0.0, hashing_seconds=0.0)

    async def start(self) -> None:
        try:
            try:
                await self._pool.open(wait=True, timeout=self._connect_timeout)
                await self._write_pool.open(wait=True, timeout=self._connect_timeout)
            except psycopg.Error as e:
                raise errors.storage_unavailable(
                    f"cannot connect to PostgreSQL at {self._where}: {_what(e)}"
                ) from None
            async with self._guard("create the schema", starting=True), self._pool.connection() as conn:
                if await _schema_version(conn) != SCHEMA_VERSION:
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                        if await _schema_version(conn) != SCHEMA_VERSION:  # not by a replica just now
                            await conn.execute(SCHEMA)
                            await conn.execute(
                                "INSERT INTO fairdeck_schema (id, version) VALUES (1, %s) "
                                "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                                (SCHEMA_VERSION,),
                            )
            async with self._guard("check the log", starting=True), self._pool.connection() as conn:
                await _check_log(conn)
        except BaseException as e:
            await self._pool.close()
            await self._write_pool.close()
            self._start_error = (
                e
                if isinstance(e, errors.DealerError)
                else errors.storage_unavailable("storage did not start")
            )
            self._opened.set()
            _settle([(op, False, self._start_error) for op in self._queue])
            self._queue.clear()
            raise
        self._started = True
        self._writer_task = asyncio.create_task(self._writer(), name="fairdeck-pg-writer")
        self._opened.set()

    # -- writes, group-committed ---------------------------------------------------------------

    async def create_hands(self, hands: Sequence[NewHand]) -> list[HandRecord]:
        if not hands:
            return []
        fut: asyncio.Future[list[HandRecord]] = self._future()
        self._enqueue(_Create(hands, fut))
        return await fut

    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        fut: asyncio.Future[tuple[HandRecord, T]] = self._future()
        self._enqueue(_Update(tenant, hand_id, decide, fut))
        return await fut

    # -- reads ------------------------------------------------------------------------------------

    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        row = await self._one(
            f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = %s AND tenant = %s",  # noqa: S608
            (hand_id, tenant),
        )
        return None if row is None else hand_record(row)

    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str]]:
        rows = await self._all(
            # state <> 3 spelled as in the partial index, so the index serves the query
            "SELECT tenant, hand_id FROM hands WHERE state <> 3 AND created_ms < %s "
            "ORDER BY created_ms LIMIT %s",
            (created_before_ms, limit),
        )
        return [(r[0], r[1]) for r in rows]

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
                    (
                        token.token_id,
                        token.tenant,
                        token.role,
                        token.digest,
                        token.created_ms,
                        token.label,
                        token.revoked_ms,
                    ),
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

    # -- start-up checks of the log's identity (fairdeck_server.startup) --------------------------

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

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wakeup.set()
        if self._writer_task is not None:  # it finishes what is queued first
            await asyncio.gather(self._writer_task, return_exceptions=True)
        await self._pool.close()
        await self._write_pool.close()

    # -- the writer ---------------------------------------------------------------------------------

    def _future(self) -> asyncio.Future[Any]:
        """A future for a queued write; queued before start(), it waits for the writer."""
        if self._closed:
            raise errors.storage_unavailable("storage is closed")
        if self._start_error is not None:
            raise errors.storage_unavailable(str(self._start_error))
        return asyncio.get_running_loop().create_future()

    def _enqueue(self, op: _Op) -> None:
        self._queue.append(op)
        self._wakeup.set()

    async def _writer(self) -> None:
        while True:
            while not self._queue:
                if self._closed:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
            # Everything queued while the previous batch committed: one transaction, one WAL flush.
            batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
            try:
                await self._run(batch)
            except Exception as e:  # a bug: fail the batch, keep the writer alive
                log.error("storage writer failed: %s", type(e).__name__)
                _settle([(op, False, errors.storage_unavailable("storage failed")) for op in batch])

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
                    _settle([(batch[0], False, _not_recorded())])
                    return
                await asyncio.sleep(0.005 * attempt)
            except _Unavailable as e:
                _settle([(op, False, e.error) for op in batch])
                return
        if plan.deferred:
            self._queue.extendleft(reversed(plan.deferred))
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
            log.warning("storage batch of %d rolled back: %s", len(batch), _what(e))
            raise _Retry(again) from None
        except psycopg.Error as e:
            log.error("storage batch of %d failed, rolled back: %s", len(batch), _what(e))
            raise _Unavailable(_not_recorded()) from None
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

    # -- helpers ------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _guard(self, doing: str, *, starting: bool = False) -> AsyncIterator[None]:
        """Wait for start(); psycopg errors become STORAGE_UNAVAILABLE, without PostgreSQL's text."""
        if not (starting or self._started or self._closed):
            await self._opened.wait()
        if self._closed:
            raise errors.storage_unavailable("storage is closed")
        if self._start_error is not None:
            raise errors.storage_unavailable(str(self._start_error))
        try:
            yield
        except psycopg.Error as e:
            log.error("storage failed to %s: %s", doing, _what(e))
            raise errors.storage_unavailable(f"storage failed to {doing}") from None

    async def _one(self, query: str, params: tuple[Any, ...]) -> TupleRow | None:
        async with self._guard("read"), self._pool.connection() as conn:
            cur = await conn.execute(query, params, binary=True)
            return await cur.fetchone()

    async def _all(self, query: str, params: tuple[Any, ...]) -> list[TupleRow]:
        async with self._guard("read"), self._pool.connection() as conn:
            cur = await conn.execute(query, params, binary=True)
            return await cur.fetchall()


def _reads(batch: list[_Op]) -> tuple[list[tuple[str, str]], list[str]]:
    """What phase 1 must read: the (tenant, request id) of idempotent opens, the hands to update."""
    keys = {
        (n.record.tenant, n.record.request_id)
        for op in batch
        if isinstance(op, _Create)
        for n in op.hands
        if n.record.request_id is not None
    }
    ids = {op.hand_id for op in batch if isinstance(op, _Update)}
    return sorted(keys), sorted(ids)


async def _read_and_lock(
    cur: psycopg.AsyncClientCursor[TupleRow], keys: list[tuple[str, str]], ids: list[str]
) -> tuple[dict[tuple[str, str], HandRecord], dict[str, HandRecord]]:
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
    existing: dict[tuple[str, str], HandRecord] = {}
    if keys:
        for row in sets.pop(0):
            r = hand_record(row)
            existing[(r.tenant, r.request_id or "")] = r
    current = {row[0]: hand_record(row) for row in sets.pop(0)} if ids else {}
    return existing, current


def _decide(
    batch: list[_Op], existing: dict[tuple[str, str], HandRecord], current: dict[str, HandRecord]
) -> _Batch:
    """Phase 1's decisions, from what was read: no I/O. A refused operation fails
    alone; a second one on the same hand or request id waits for the next batch."""
    plan = _Batch()
    claimed: set[tuple[str, str]] = set()
    touched: set[str] = set()
    for op in batch:
        if isinstance(op, _Create):
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
    """The batch as the one JSON document _APPEND reads (bytes in hex)."""
    hands = [
        {
            "hand_id": r.hand_id,
            "tenant": r.tenant,
            "request_id": r.request_id,
            "deck": r.deck,
            "version": r.version,
            "commitment": r.commitment.hex(),
            "sealed_seed": r.sealed_seed.hex(),
            "client_seeds": encode_seeds(r.client_seeds).hex(),
            "state": int(r.state),
            "dealt": r.dealt,
            "created_ms": r.created_ms,
            "commit_pos": commit_pos,
            "closed_ms": r.closed_ms,
            "server_seed": _hex(r.server_seed),
            "reveal_pos": reveal_pos,
            "request_fp": _hex(r.request_fingerprint),
        }
        for r, commit_pos, reveal_pos in plan.inserts
    ]
    return _json({"entries": [e.hex() for e in plan.entries], "hands": hands, "updates": _updates(plan)})


def _prepare_create(
    plan: _Batch, op: _Create, existing: dict[tuple[str, str], HandRecord], claimed: set[tuple[str, str]]
) -> None:
    keys = [(n.record.tenant, n.record.request_id) for n in op.hands if n.record.request_id is not None]
    if any(k in claimed for k in keys):
        plan.deferred.append(op)  # the same request id earlier in this batch: wait to see its stored hand
        return
    stored_for: list[HandRecord | None] = []
    for n in op.hands:
        r = n.record
        stored = None if r.request_id is None else existing.get((r.tenant, r.request_id))
        if stored is not None and not hmac.compare_digest(
            stored.request_fingerprint or b"", r.request_fingerprint or b""
        ):
            plan.failed.append((op, _request_id_reused()))
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

    def build(base: int) -> list[HandRecord]:
        result = []
        for m in made:
            if isinstance(m, HandRecord):
                result.append(m)
                continue
            r, c, v = inserts[m]
            result.append(replace(r, commit_index=base + c, reveal_index=None if v is None else base + v))
        return result

    plan.results.append((op, build))


def _request_id_reused() -> errors.DealerError:
    return errors.request_id_reused()


def _prepare_update(plan: _Batch, op: _Update, current: HandRecord | None) -> None:
    if current is None or current.tenant != op.tenant:
        plan.failed.append((op, errors.hand_not_found()))
        return
    try:
        change, value = op.decide(current)
    except Exception as e:  # refused (DealerError), or a bug: this operation alone fails
        if not isinstance(e, errors.DealerError):
            log.error("storage update failed: %s", type(e).__name__)
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
    def __init__(self, error: errors.DealerError) -> None:
        super().__init__(str(error))
        self.error = error


def _not_recorded() -> errors.DealerError:
    return errors.storage_unavailable("storage failed; the request may not have been recorded")


def _what(e: BaseException) -> str:
    """An exception named without its message (PostgreSQL's may quote values)."""
    state = getattr(e, "sqlstate", None)
    return f"{type(e).__name__}" + (f" (SQLSTATE {state})" if state else "")


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


async def _schema_version(conn: psycopg.AsyncConnection[TupleRow]) -> str | None:
    """The SCHEMA_VERSION recorded in the database (None: none yet, or a new database)."""
    cur = await conn.execute("SELECT to_regclass('fairdeck_schema') IS NOT NULL")
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    cur = await conn.execute("SELECT version FROM fairdeck_schema WHERE id = 1")
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def _check_log(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """At start: the head row agrees with the entries and with the stored hashes."""
    cur = await conn.execute(
        "SELECT size, frontier, (SELECT COALESCE(MAX(idx) + 1, 0) FROM log_entries) "
        "FROM log_head WHERE id = 1",
        binary=True,
    )
    row = await cur.fetchone()
    if row is None:
        raise errors.storage_unavailable("the log head row is missing: the log is damaged")
    size, blob, entries = int(row[0]), bytes(row[1]), int(row[2])
    if entries != size:
        raise errors.storage_unavailable(f"the log head says {size} entries, the table holds {entries}")
    frontier = _Frontier.parse(size, blob)
    stored = await _read_hashes(conn, [index for _, index, _ in frontier.stack])
    if [stored.get(index) for _, index, _ in frontier.stack] != [h for _, _, h in frontier.stack]:
        raise errors.storage_unavailable("the log head's frontier differs from the stored hashes")


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
            raise errors.storage_unavailable("a stored hash of the log is missing") from None

    return compute(read)


async def _tree_hash(conn: psycopg.AsyncConnection[TupleRow], size: int) -> bytes:
    return await _with_hashes(conn, lambda read: merkle.tree_hash(size, read))


class _Frontier:
    """The right edge of the tree: its complete subtrees as (level, stored index, hash), largest first.

    Stored in ``log_head.frontier`` as the hashes alone; the levels and
    indexes follow from the size (one subtree per set bit). Appends update it
    in the database (``fairdeck_append``); here it is read, for the root and
    to check the head at start.
    """

    __slots__ = ("stack",)

    def __init__(self, stack: list[tuple[int, int, bytes]]) -> None:
        self.stack = stack

    @classmethod
    def parse(cls, size: int, blob: bytes) -> _Frontier:
        subtrees = merkle.frontier_subtrees(size)
        if len(blob) != merkle.HASH_SIZE * len(subtrees):
            raise errors.storage_unavailable("the log head's frontier does not fit its size")
        hashes = [blob[i : i + merkle.HASH_SIZE] for i in range(0, len(blob), merkle.HASH_SIZE)]
        stack = [(level, index, h) for (level, index), h in zip(subtrees, hashes, strict=True)]
        return cls(stack)

    def root(self) -> bytes:
        if not self.stack:
            return merkle.EMPTY_ROOT
        h = self.stack[-1][2]
        for _, _, left in reversed(self.stack[:-1]):
            h = merkle.node_hash(left, h)
        return h


def read_log(url: str) -> tuple[int, list[bytes], Iterator[bytes]]:
    """Read-only view of a database's log for ``fairdeck audit --db``, as sqlite.read_log.

    One REPEATABLE READ, READ ONLY transaction: the count, the checkpoints and
    the entries all come from one snapshot while replicas keep appending, and the
    entries stream through a server-side cursor rather than into memory.
    """
    conn = psycopg.connect(url, autocommit=False, application_name="fairdeck-audit")
    try:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        row = conn.execute("SELECT count(*) FROM log_entries").fetchone()
        count = int(row[0]) if row is not None else 0
        notes = [bytes(r[0]) for r in conn.execute("SELECT note FROM checkpoints ORDER BY size")]
    except BaseException:
        conn.close()
        raise

    def entries() -> Iterator[bytes]:
        try:
            with conn.cursor(name="fairdeck_audit") as cursor:
                cursor.itersize = 10_000
                cursor.execute("SELECT idx, entry FROM log_entries ORDER BY idx")
                yield from entries_in_order(cursor)
        finally:
            conn.close()

    return count, notes, entries()
