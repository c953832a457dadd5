"""The SQLite schema, and opening a database file: whole, checked, in WAL mode, or refused.

A database is an identity: ``create_database`` makes one only for ``fairdeck init`` or a fresh data
dir, and ``open_database`` refuses (StartupRefused, one line naming the file) a file that is
missing, not ours, truncated, damaged (quick_check) or whose log has gaps; a file it may not write,
on a read-only mount, locked or on a full disk is refused in words of its own (diagnosis.py).

The database holds sealed seeds, tokens' digests and tenants' hands: it is made 0600, and its
-wal and -shm files get the same mode from SQLite; an older, more open file is tightened at start.
The WAL is truncated back to ``JOURNAL_SIZE_LIMIT`` when it restarts, so one that grew behind a
reader holding a snapshot (a backup tool) shrinks once the reader is gone (docs/operations.md).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from fairdeck_server.refusals import RESTORE, StartupRefused
from fairdeck_server.storage.sqlite.diagnosis import explain

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
-- A tenant's open hands (its cap), counted without passing every other tenant's open hands.
CREATE INDEX IF NOT EXISTS hands_open_tenant ON hands (tenant) WHERE state != 3;
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
log = logging.getLogger(__name__)
JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024
"""Bytes the WAL file is cut back to when it restarts (PRAGMA journal_size_limit)."""
TABLES = ("hands", "log_entries", "log_hashes", "checkpoints")
"""Tables every fairdeck database has had from the start: one without them is truncated or not ours."""


def open_database(path: Path, *, create: bool) -> sqlite3.Connection:
    """The writer's connection: WAL, synchronous=FULL, the schema's tables (IF NOT EXISTS: adds
    only those a newer version brought). Without ``create`` the file must exist and hold a
    fairdeck database (mode=rw: a file that vanished since start is not made again, empty)."""
    target = path if create else f"file:{quote(str(path.absolute()))}?mode=rw"
    conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, uri=not create)
    try:
        _check(conn, path, create)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise RuntimeError(f"journal_mode is {mode}, WAL required")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        conn.executescript(SCHEMA)
        private(path)
        row = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0), COUNT(*) FROM log_entries").fetchone()
        if row[0] != row[1]:
            raise StartupRefused(f"database {path}: log_entries has gaps, the log is damaged; {RESTORE}")
    except sqlite3.DatabaseError as e:  # damaged, or not writable, read-only, locked, full: each its own
        conn.close()
        raise StartupRefused(explain(path, e)) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _check(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    """Refuse a database that is not whole: no tables (truncated, or not ours) or damaged pages.

    quick_check reads every page (not the index contents), so a page of garbage in
    the middle of the file is found here, at start, not by the hand that lands on it.
    """
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not create and not set(TABLES) <= names:
        raise StartupRefused(
            f"database {path} has no fairdeck tables (truncated, or not a fairdeck database); {RESTORE}"
        )
    problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)").fetchall()]
    if problems != ["ok"]:
        raise StartupRefused(
            f"database {path} is damaged (PRAGMA quick_check: {'; '.join(problems)}); do not write to it; "
            f"{RESTORE}"
        )


def create_database(path: Path, meta: dict[str, str]) -> None:
    """A new, empty database at ``path`` with ``meta`` recorded; refuses one that is there.

    Only ``fairdeck init`` and ``serve`` on a fresh data dir call it: a database
    is an identity, never made again because a file went missing.
    """
    if path.exists() and path.stat().st_size > 0:
        raise StartupRefused(f"database {path} already exists; fairdeck never replaces one")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # SQLite gives -wal and -shm its mode
    private(path)
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


def private(path: Path) -> None:
    """Make the database and its -wal and -shm files 0600 if they are more open (one log line)."""
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077:
                os.chmod(file, mode & 0o700)
                log.warning(
                    "%s was mode %04o: now %04o (it holds sealed seeds and tenants' hands)",
                    file,
                    mode,
                    mode & 0o700,
                )
        except FileNotFoundError:
            continue
