"""Every statement that reads a PostgreSQL database: the live dealer's reads, each a function of
a pool connection (engine.PostgresStorage runs them), the log's check at start, and ``read_log``,
the read-only view of a database's log for ``fairdeck audit --db``.

``read_log`` writes nothing and reads one snapshot; like the rest of this module it needs neither
the schema module nor the writer, only psycopg and the row order both engines share (storage.base).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg.rows import TupleRow

from fairdeck.log import merkle
from fairdeck_server import refusals
from fairdeck_server.storage.base import HandRecord, StoredCheckpoint, TokenRecord, _Frontier
from fairdeck_server.storage.rows import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    entries_in_order,
    hand_record,
    token_record,
)

T = TypeVar("T")
Connection = psycopg.AsyncConnection[TupleRow]
CHECKPOINT_AT = "SELECT size, root, note FROM checkpoints WHERE size = %s"
LATEST_CHECKPOINT = "SELECT size, root, note FROM checkpoints ORDER BY size DESC LIMIT 1"


async def _one(conn: Connection, query: str, params: tuple[object, ...] = ()) -> TupleRow | None:
    cur = await conn.execute(query, params, binary=True)
    return await cur.fetchone()


async def _all(conn: Connection, query: str, params: tuple[object, ...] = ()) -> list[TupleRow]:
    cur = await conn.execute(query, params, binary=True)
    return await cur.fetchall()


async def get_hand(conn: Connection, tenant: str, hand_id: str) -> HandRecord | None:
    row = await _one(
        conn,
        f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = %s AND tenant = %s",  # noqa: S608
        (hand_id, tenant),
    )
    return None if row is None else hand_record(row)


async def stale_hands(conn: Connection, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
    rows = await _all(
        conn,
        # state <> 3 spelled as in the partial index, so the index serves the query
        "SELECT tenant, hand_id, created_ms FROM hands WHERE state <> 3 AND created_ms < %s "
        "ORDER BY created_ms LIMIT %s",
        (created_before_ms, limit),
    )
    return [(r[0], r[1], int(r[2])) for r in rows]


async def stored_log_size(conn: Connection) -> int:
    row = await _one(conn, "SELECT size FROM log_head WHERE id = 1")
    return 0 if row is None else int(row[0])


async def log_entries(conn: Connection, start: int, end: int) -> list[bytes]:
    rows = await _all(
        conn, "SELECT entry FROM log_entries WHERE idx >= %s AND idx < %s ORDER BY idx", (start, end)
    )
    return [bytes(r[0]) for r in rows]


async def log_head(conn: Connection) -> tuple[int, bytes]:
    """(size, root) of the log as committed now: one row, the root folded from its frontier."""
    row = await _one(conn, "SELECT size, frontier FROM log_head WHERE id = 1")
    if row is None:
        return 0, merkle.EMPTY_ROOT
    return int(row[0]), _Frontier.parse(int(row[0]), bytes(row[1])).root()


async def checkpoint(conn: Connection, size: int | None) -> StoredCheckpoint | None:
    if size is None:
        row = await _one(conn, LATEST_CHECKPOINT)
    else:
        row = await _one(conn, CHECKPOINT_AT, (size,))
    return None if row is None else StoredCheckpoint(int(row[0]), bytes(row[1]), bytes(row[2]))


async def inclusion_proof(conn: Connection, index: int, size: int) -> list[bytes]:
    return await _with_hashes(conn, lambda read: merkle.prove_inclusion(index, size, read))


async def consistency_proof(conn: Connection, size1: int, size2: int) -> list[bytes]:
    return await _with_hashes(conn, lambda read: merkle.prove_consistency(size1, size2, read))


async def entry_index(conn: Connection, hand_id: str, reveal: bool) -> int | None:
    """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
    column = "reveal_index" if reveal else "commit_index"
    row = await _one(conn, f"SELECT {column} FROM hands WHERE hand_id = %s", (hand_id,))  # noqa: S608
    return None if row is None or row[0] is None else int(row[0])


async def open_hands(conn: Connection, tenant: str | None) -> int:
    if tenant is None:
        row = await _one(conn, "SELECT count(*) FROM hands WHERE state <> 3")
    else:
        row = await _one(conn, "SELECT count(*) FROM hands WHERE state <> 3 AND tenant = %s", (tenant,))
    return 0 if row is None else int(row[0])


async def get_token(conn: Connection, token_id: str) -> TokenRecord | None:
    row = await _one(conn, f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = %s", (token_id,))  # noqa: S608
    return None if row is None else token_record(row)


async def list_tokens(conn: Connection, tenant: str | None) -> list[TokenRecord]:
    query = f"SELECT {TOKEN_COLUMNS} FROM tokens"  # noqa: S608
    if tenant is None:
        rows = await _all(conn, query + " ORDER BY created_ms, token_id")
    else:
        rows = await _all(conn, query + " WHERE tenant = %s ORDER BY created_ms, token_id", (tenant,))
    return [token_record(r) for r in rows]


async def sealed_seed_samples(conn: Connection) -> list[tuple[str, bytes]]:
    """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal)."""
    rows = await _all(
        conn,
        "SELECT DISTINCT ON (substring(sealed_seed FROM 2 FOR 4)) hand_id, sealed_seed FROM hands "
        "WHERE state <> 3 ORDER BY substring(sealed_seed FROM 2 FOR 4), hand_id",
    )
    return [(str(r[0]), bytes(r[1])) for r in rows]


async def get_meta(conn: Connection, name: str) -> str | None:
    row = await _one(conn, "SELECT value FROM fairdeck_meta WHERE name = %s", (name,))
    return None if row is None else str(row[0])


async def check_log(conn: Connection) -> None:
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


async def _read_hashes(conn: Connection, indexes: list[int]) -> dict[int, bytes]:
    if not indexes:
        return {}
    cur = await conn.execute(
        "SELECT idx, hash FROM log_hashes WHERE idx = ANY(%s::bigint[])",
        (indexes,),
        binary=True,
        prepare=True,
    )
    return {int(r[0]): bytes(r[1]) for r in await cur.fetchall()}


async def _with_hashes(conn: Connection, compute: Callable[[merkle.HashReader], T]) -> T:
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


async def tree_hash(conn: Connection, size: int) -> bytes:
    return await _with_hashes(conn, lambda read: merkle.tree_hash(size, read))


# -- the audit reader -----------------------------------------------------------------------------


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
        notes += _rotations(conn)
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


def _rotations(conn: psycopg.Connection[tuple[object, ...]]) -> list[bytes]:
    """The log key rotation statements the dealer recorded (startup.ROTATION_META). A role that may
    read only the log's two tables gets none: then an auditor needs the current key."""
    try:
        with conn.transaction():  # a savepoint: a refused SELECT must not end the snapshot
            rows = conn.execute(
                "SELECT value FROM fairdeck_meta WHERE name LIKE 'log_key_rotation/%' ORDER BY name"
            ).fetchall()
    except psycopg.errors.InsufficientPrivilege:
        return []
    return [str(r[0]).encode() for r in rows]


CODEAL_KINDS = tuple(b"FDL1" + bytes([kind]) for kind in range(3, 8))
"""The first five bytes of each co-dealt entry (fairdeck.codeal.entries: types 3 to 7)."""


def first_codeal_entry(url: str) -> int | None:
    """The index of the log's first co-dealt entry, or None (none, or no log yet), as the SQLite
    reader's: one short read-only connection; ``LogUnreadable`` names the database, not its password."""
    row = _log_row(
        url,
        "SELECT idx FROM log_entries WHERE substring(entry FROM 1 FOR 5) IN (%s, %s, %s, %s, %s) "
        "ORDER BY idx LIMIT 1",
        CODEAL_KINDS,
    )
    return None if row is None else int(row[0])


def log_entry_at(url: str, index: int) -> bytes | None:
    """The log's entry at ``index``, or None (none, or no log yet), as the SQLite reader's."""
    row = _log_row(url, "SELECT entry FROM log_entries WHERE idx = %s", (index,))
    return None if row is None else bytes(row[0])


def _log_row(url: str, query: str, params: tuple[object, ...]) -> tuple[Any, ...] | None:
    """The first row of ``query`` on one short connection with bounded connect and statements (a
    start never hangs on it); None when there is no log table yet."""
    from fairdeck.log.audit import LogUnreadable
    from fairdeck_server.storage.postgres.diagnosis import describe, what

    try:
        with psycopg.connect(
            url,
            autocommit=True,
            application_name="fairdeck-codeal-check",
            connect_timeout=10,
            options="-c statement_timeout=10000",
        ) as conn:
            made = conn.execute("SELECT to_regclass('log_entries') IS NOT NULL").fetchone()
            if made is None or not made[0]:
                return None
            row: tuple[Any, ...] | None = conn.execute(query, params).fetchone()
            return row
    except (psycopg.Error, OverflowError, ValueError) as e:
        raise LogUnreadable(
            f"cannot read the log of the PostgreSQL database {describe(url)}: {what(e)}"
        ) from None
