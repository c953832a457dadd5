"""Every statement that writes a PostgreSQL database, each a function of a connection: the group
commit's (batches.py runs them, one transaction per batch) and those a pool connection runs alone
(checkpoints, cosignatures, tokens, the log's facts, the health probe).

Every append locks the one ``log_head`` row (tree size and frontier) in the transaction that
writes its entries, hashes and hand rows, until COMMIT: one sequence across replicas, gap-free and
never forked. A batch first reads and locks its hands (hand-id order, ``read_and_lock``); then one
statement (``_APPEND``, through ``fairdeck_append``) takes the log lock last and writes it all.
The design: docs/scaling.md ("The PostgreSQL writer").
"""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import TupleRow

from fairdeck.log.cosignature import add_cosignatures as cosigned
from fairdeck_server import refusals
from fairdeck_server.storage.base import HandBatch, HandRecord, LogForkError, StoredCheckpoint, TokenRecord
from fairdeck_server.storage.postgres.reader import (
    CHECKPOINT_AT,
    LATEST_CHECKPOINT,
    stored_log_size,
    tree_hash,
)
from fairdeck_server.storage.rows import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    batch_hand_rows,
    encode_seeds,
    hand_record,
    hand_row,
    token_row,
)

Connection = psycopg.AsyncConnection[TupleRow]
CHECKPOINT_LOCK = 0x6664_6B02
"""pg_advisory_xact_lock key serialising checkpoint compare-and-swap (appends do not take it)."""

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
    "batch AS MATERIALIZED (SELECT array_agg(decode(e.x, 'hex') ORDER BY e.o) AS bytes "
    "FROM doc, jsonb_array_elements_text(doc.d -> 'entries') WITH ORDINALITY AS e (x, o)), "
    # The leaf hashes are computed here, before fairdeck_append takes the lock (which hashes again
    # only an entry whose time it raises to the latest entry's).
    "a AS MATERIALIZED (SELECT f.* FROM batch, fairdeck_append(batch.bytes, ARRAY("
    "SELECT sha256(decode('00', 'hex') || l.x) FROM unnest(batch.bytes) WITH ORDINALITY AS l (x, o) "
    "ORDER BY l.o)) AS f), "
    "entries AS (INSERT INTO log_entries (idx, entry) SELECT a.base + s.o - 1, s.x "
    "FROM a, unnest(a.stored) WITH ORDINALITY AS s (x, o)), "
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

Readable = HandRecord | refusals.DealerError
"""A stored hand as phase 1 read it: its record, or the HAND_UNREADABLE refusal of a damaged row."""


@dataclass
class BatchWrites:
    """What a batch writes: entries to append (positions are offsets from the tree size the log
    lock will show), hands to insert and to update, batches of hands."""

    entries: list[bytes] = field(default_factory=list)
    inserts: list[tuple[HandRecord, int, int | None]] = field(default_factory=list)
    """(record, commit entry position, reveal entry position)."""
    updates: list[tuple[HandRecord, int | None]] = field(default_factory=list)
    """(new record, reveal entry position)."""
    batches: list[tuple[HandBatch, int]] = field(default_factory=list)
    """(batch of hands, position of its first entry)."""

    def append(self, entry: bytes) -> int:
        self.entries.append(entry)
        return len(self.entries) - 1


async def read_and_lock(
    cur: psycopg.AsyncClientCursor[TupleRow], keys: list[tuple[str, str]], ids: list[str]
) -> tuple[dict[tuple[str, str], Readable], dict[str, Readable]]:
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
    existing: dict[tuple[str, str], Readable] = {}
    if keys:
        for row in sets.pop(0):
            existing[(row[1], row[2] or "")] = _record(row)
    current = {row[0]: _record(row) for row in sets.pop(0)} if ids else {}
    return existing, current


def _record(row: TupleRow) -> Readable:
    """The hand in ``row``, or the HAND_UNREADABLE refusal of a damaged one: that operation alone
    fails (``_prepare_*``), never the batch around it."""
    try:
        return hand_record(row)
    except refusals.DealerError as e:
        return e


async def write_alone(conn: psycopg.AsyncConnection[TupleRow], plan: BatchWrites) -> TupleRow | None:
    """Phase 2 of a batch that read nothing: the write is the whole transaction (autocommit)."""
    if not plan.entries:
        return None
    cur = await conn.execute(_APPEND, (_append_doc(plan),), prepare=True, binary=True)
    return await cur.fetchone()


async def write_and_commit(cur: psycopg.AsyncClientCursor[TupleRow], plan: BatchWrites) -> TupleRow | None:
    """Phase 2 after reads: the write and COMMIT in one string, one round trip."""
    if plan.entries:
        await cur.execute(_APPEND + "; COMMIT", (_append_doc(plan),))
        return await cur.fetchone()
    if plan.updates:
        await cur.execute(_UPDATE_HANDS + "; COMMIT", (_json({"updates": _updates(plan)}),))
    else:
        await cur.execute("COMMIT")
    return None


async def rollback(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """End a failed transaction (the pool would too, with a warning); a broken connection is left to it."""
    if conn.info.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        with contextlib.suppress(psycopg.Error):
            await conn.execute("ROLLBACK")


def _updates(plan: BatchWrites) -> list[dict[str, Any]]:
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


def _append_doc(plan: BatchWrites) -> str:
    """The batch as the one JSON document _APPEND reads (bytes in hex): each hand row's values by
    name (HAND_FIELDS, its log indexes as positions in the batch: commit_pos, reveal_pos)."""
    rows = [hand_row(r, commit_pos, reveal_pos) for r, commit_pos, reveal_pos in plan.inserts]
    for b, first in plan.batches:
        rows += batch_hand_rows(b, first)
    hands = [
        {
            "hand_id": h, "tenant": t, "request_id": q, "deck": d, "version": v, "commitment": c.hex(),
            "sealed_seed": s.hex(), "client_seeds": cs.hex(), "state": st, "dealt": n, "created_ms": ms,
            "commit_pos": ci, "closed_ms": cm, "server_seed": None if ss is None else ss.hex(),
            "reveal_pos": ri, "request_fp": None if fp is None else fp.hex(),
        }
        for h, t, q, d, v, c, s, cs, st, n, ms, ci, cm, ss, ri, fp in rows
    ]  # fmt: skip
    return _json({"entries": [e.hex() for e in plan.entries], "hands": hands, "updates": _updates(plan)})


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))


# -- statements a pool connection runs alone ------------------------------------------------------


async def put_checkpoint(
    conn: Connection, size: int, root: bytes, note: bytes, time_ms: int
) -> StoredCheckpoint:
    """In the caller's transaction: store a signed checkpoint if it moves the head forward
    (compare-and-swap); the head afterwards. A size already signed is never replaced; another root
    there, or a root that is not the stored tree's, raises LogForkError. Publishers on several
    replicas are serialised by an advisory lock (not the log lock, so appends go on), and the
    primary key on size backs the rule up."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHECKPOINT_LOCK,))
    cur = await conn.execute(CHECKPOINT_AT, (size,), binary=True)
    same = await cur.fetchone()
    if same is not None:
        if not hmac.compare_digest(bytes(same[1]), root):
            raise LogForkError(f"a different root is already signed for tree size {size}")
        return StoredCheckpoint(int(same[0]), bytes(same[1]), bytes(same[2]))
    log_size = await stored_log_size(conn)
    if size > log_size or not hmac.compare_digest(await tree_hash(conn, size), root):
        raise LogForkError(f"checkpoint root for size {size} is not the stored tree's")
    cur = await conn.execute(LATEST_CHECKPOINT, binary=True)
    head = await cur.fetchone()
    if head is not None and int(head[0]) > size:
        return StoredCheckpoint(int(head[0]), bytes(head[1]), bytes(head[2]))
    await conn.execute(
        "INSERT INTO checkpoints (size, root, note, time_ms) VALUES (%s, %s, %s, %s)",
        (size, root, note, time_ms),
    )
    return StoredCheckpoint(size, root, note)


async def add_cosignatures(conn: Connection, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
    """In the caller's transaction, under the checkpoints' advisory lock."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHECKPOINT_LOCK,))
    cur = await conn.execute("SELECT root, note FROM checkpoints WHERE size = %s", (size,), binary=True)
    row = await cur.fetchone()
    if row is None:
        return None
    note = cosigned(bytes(row[1]), lines)
    if note != bytes(row[1]):
        await conn.execute("UPDATE checkpoints SET note = %s WHERE size = %s", (note, size))
    return StoredCheckpoint(size, bytes(row[0]), note)


async def put_token(conn: Connection, token: TokenRecord) -> None:
    try:
        await conn.execute(
            f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",  # noqa: S608
            token_row(token),
        )
    except psycopg.errors.UniqueViolation:
        raise ValueError(f"token {token.token_id} already exists") from None


async def revoke_token(conn: Connection, token_id: str, when_ms: int) -> TupleRow | None:
    """In the caller's transaction: the token's row after (the caller reads it once committed)."""
    await conn.execute(
        "UPDATE tokens SET revoked_ms = %s WHERE token_id = %s AND revoked_ms IS NULL",
        (when_ms, token_id),
    )
    cur = await conn.execute(
        f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = %s",  # noqa: S608
        (token_id,),
        binary=True,
    )
    return await cur.fetchone()


async def set_meta(conn: Connection, name: str, expected: str | None, value: str) -> bool:
    """Set ``name`` to ``value`` if it is still ``expected`` (None: unset); False if another
    replica changed it first (compare-and-swap, so two replicas cannot both win)."""
    if expected is None:
        query = "INSERT INTO fairdeck_meta (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"
        params: tuple[Any, ...] = (name, value)
    else:
        query = "UPDATE fairdeck_meta SET value = %s WHERE name = %s AND value = %s"
        params = (value, name, expected)
    cur = await conn.execute(query, params)
    return cur.rowcount == 1


async def probe(conn: Connection) -> None:
    """In the caller's transaction: take a transaction id, so its COMMIT is a WAL record flushed
    to disk (it fails when the server cannot write), with an UPDATE that matches no row, so it
    is refused in a read-only transaction (a standby, default_transaction_read_only). No DDL, no
    row locked: it never waits for the dealers' own writes."""
    await conn.execute("UPDATE tokens SET revoked_ms = revoked_ms WHERE false")
    await conn.execute("SELECT txid_current()")
