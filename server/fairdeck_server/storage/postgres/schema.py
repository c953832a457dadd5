"""The PostgreSQL schema: tables, indexes and the log's append function (PL/pgSQL), and its version.

``SCHEMA`` is run whole, once per version: a replica that finds its
``SCHEMA_VERSION`` already recorded runs no DDL. The version is a hash of the
text, so any change to it (a byte) makes every replica's next start upgrade the
database; leave it alone unless the schema really changes. Imports psycopg and
nothing of the rest of the engine.
"""

from __future__ import annotations

import hashlib

import psycopg
from psycopg.rows import TupleRow

SCHEMA_LOCK = 0x6664_6B01
"""pg_advisory_xact_lock key serialising schema creation by replicas starting together."""

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
-- The time_ms of the latest entry: no entry appended after it has an earlier one.
ALTER TABLE log_head ADD COLUMN IF NOT EXISTS last_ms bigint NOT NULL DEFAULT 0;
UPDATE log_head SET last_ms = COALESCE((
    SELECT ('x' || encode(substring(entry FROM 6 FOR 8), 'hex'))::bit(64)::bigint FROM log_entries
    WHERE substring(entry FROM 1 FOR 4) = 'FDL1'::bytea AND octet_length(entry) >= 13
    ORDER BY idx DESC LIMIT 1), 0) WHERE id = 1 AND last_ms = 0;
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
-- while the server works: it locks the head row, keeps entry times from going
-- backwards (an entry stamped before the latest one, by a replica whose batch
-- waited for the lock, gets the latest time, and its leaf is hashed again),
-- hashes the new leaves into the stored-hash layout (fairdeck.log.merkle: a
-- leaf's hash, then each subtree it completes), inserts those hashes and moves
-- the head. The caller inserts the entries as returned (stored), at base,
-- base + 1, ... in the same statement.
CREATE OR REPLACE FUNCTION fairdeck_append(
    entries bytea[], leaves bytea[], OUT base bigint, OUT waited_us bigint, OUT hashing_us bigint,
    OUT stored bytea[]
) LANGUAGE plpgsql AS $fn$
DECLARE
    v_last bigint;
    t bigint;
    i_entry int;
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
    SELECT size, frontier, last_ms INTO v_size, v_blob, v_last FROM log_head WHERE id = 1 FOR UPDATE;
    granted := clock_timestamp();
    stored := entries;
    FOR i_entry IN 1..coalesce(array_length(entries, 1), 0) LOOP
        IF octet_length(entries[i_entry]) < 13
                OR substring(entries[i_entry] FROM 1 FOR 4) <> 'FDL1'::bytea THEN
            CONTINUE;  -- not an entry of this format: stored as it is
        END IF;
        t := ('x' || encode(substring(entries[i_entry] FROM 6 FOR 8), 'hex'))::bit(64)::bigint;
        IF t < v_last THEN
            stored[i_entry] := overlay(entries[i_entry] PLACING int8send(v_last) FROM 6 FOR 8);
            leaves[i_entry] := sha256(decode('00', 'hex') || stored[i_entry]);  -- RFC 9162 leaf
        ELSE
            v_last := t;
        END IF;
    END LOOP;
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
    SET size = v_size + cardinality(leaves), last_ms = v_last,
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


async def schema_version(conn: psycopg.AsyncConnection[TupleRow]) -> str | None:
    """The SCHEMA_VERSION recorded in the database (None: none yet, or a new database)."""
    cur = await conn.execute("SELECT to_regclass('fairdeck_schema') IS NOT NULL")
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    cur = await conn.execute("SELECT version FROM fairdeck_schema WHERE id = 1")
    row = await cur.fetchone()
    return None if row is None else str(row[0])


async def ensure_schema(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """Create or upgrade the schema unless this version is recorded already. Replicas
    starting together are serialised by an advisory lock; the one that got it first
    has done the work when the next looks again."""
    if await schema_version(conn) != SCHEMA_VERSION:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            if await schema_version(conn) != SCHEMA_VERSION:  # not by a replica just now
                await conn.execute(SCHEMA)
                await conn.execute(
                    "INSERT INTO fairdeck_schema (id, version) VALUES (1, %s) "
                    "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                    (SCHEMA_VERSION,),
                )
