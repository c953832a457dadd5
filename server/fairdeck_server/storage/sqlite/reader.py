"""Every statement that reads an SQLite database: the live dealer's reads, each a function of a
connection that the reader thread (batches.SqliteReader) or the writer thread runs, and ``read_log``,
the read-only view of a data dir's log for ``fairdeck audit --data``.

A read function writes nothing and holds no transaction of its own: the thread that runs it begins
and ends one around a batch of reads (a read sees every write acknowledged before it was asked for).
``read_log`` opens the file read-only (never creates it), writes nothing and holds no snapshot
long: entries are read in pages, each its own short read transaction, so a long audit never keeps
the dealer's WAL from restarting (entries never change once written, so pages agree).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fairdeck.core.encoding import u64
from fairdeck.log import merkle
from fairdeck.log.audit import LogUnreadable
from fairdeck.log.logentry import time_of
from fairdeck_server.storage.base import HandRecord, StoredCheckpoint, TokenRecord
from fairdeck_server.storage.rows import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    entries_in_order,
    hand_record,
    token_record,
)
from fairdeck_server.storage.sqlite.diagnosis import unreadable

PAGE = 5000
"""Entries per read transaction of ``read_log``."""
OPEN_HANDS_OF_TENANT = "SELECT COUNT(*) FROM hands WHERE state != 3 AND tenant = ?"
"""A tenant's open hands (its cap): served by the partial index hands_open_tenant, so it reads
that tenant's open hands only, however many other tenants hold."""
CHECKPOINT_AT = "SELECT size, root, note FROM checkpoints WHERE size = ?"
LATEST_CHECKPOINT = "SELECT size, root, note FROM checkpoints ORDER BY size DESC LIMIT 1"


def select_hand(conn: sqlite3.Connection, tenant: str, hand_id: str) -> HandRecord | None:
    row = conn.execute(f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
    if row is None or row[1] != tenant:
        return None
    return hand_record(row)


def stale_hands(conn: sqlite3.Connection, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
    rows = conn.execute(
        # state != 3 spelled as in the partial index, so the index serves the query
        "SELECT tenant, hand_id, created_ms FROM hands WHERE state != 3 AND created_ms < ? "
        "ORDER BY created_ms LIMIT ?",
        (created_before_ms, limit),
    ).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def log_entries(conn: sqlite3.Connection, start: int, end: int) -> list[bytes]:
    rows = conn.execute(
        "SELECT entry FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, end)
    ).fetchall()
    return [bytes(r[0]) for r in rows]


def stored_log_size(conn: sqlite3.Connection) -> int:
    """The number of entries stored (the writer's count at start, and after others appended)."""
    return int(conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM log_entries").fetchone()[0])


def last_entry_stamp(conn: sqlite3.Connection) -> bytes:
    """The time of the log's last entry, as its 8 bytes (zeros for an empty log)."""
    row = conn.execute("SELECT entry FROM log_entries ORDER BY idx DESC LIMIT 1").fetchone()
    time_ms = None if row is None else time_of(bytes(row[0]))
    return u64(time_ms or 0)


def hash_reader(conn: sqlite3.Connection) -> Callable[[list[int]], list[bytes]]:
    def read(indexes: list[int]) -> list[bytes]:
        marks = ",".join("?" * len(indexes))  # placeholders only; the values are bound
        query = f"SELECT idx, hash FROM log_hashes WHERE idx IN ({marks})"  # noqa: S608
        rows = dict(conn.execute(query, indexes).fetchall())
        return [bytes(rows[i]) for i in indexes]

    return read


def inclusion_proof(conn: sqlite3.Connection, index: int, size: int) -> list[bytes]:
    return merkle.prove_inclusion(index, size, hash_reader(conn))


def consistency_proof(conn: sqlite3.Connection, size1: int, size2: int) -> list[bytes]:
    return merkle.prove_consistency(size1, size2, hash_reader(conn))


def checkpoint(conn: sqlite3.Connection, size: int | None) -> StoredCheckpoint | None:
    """The signed checkpoint at ``size``, or the latest one; None if there is none."""
    if size is None:
        row = conn.execute(LATEST_CHECKPOINT).fetchone()
    else:
        row = conn.execute(CHECKPOINT_AT, (size,)).fetchone()
    return None if row is None else StoredCheckpoint(row[0], bytes(row[1]), bytes(row[2]))


def entry_index(conn: sqlite3.Connection, hand_id: str, reveal: bool) -> int | None:
    """The log index of a hand's commit (or reveal) entry, whatever its tenant."""
    column = "reveal_index" if reveal else "commit_index"
    row = conn.execute(f"SELECT {column} FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()  # noqa: S608
    return None if row is None else row[0]


def open_hands(conn: sqlite3.Connection, tenant: str | None) -> int:
    if tenant is None:
        row = conn.execute("SELECT COUNT(*) FROM hands WHERE state != 3").fetchone()
    else:
        row = conn.execute(OPEN_HANDS_OF_TENANT, (tenant,)).fetchone()
    return int(row[0])


def get_token(conn: sqlite3.Connection, token_id: str) -> TokenRecord | None:
    row = conn.execute(
        f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?",  # noqa: S608
        (token_id,),
    ).fetchone()
    return None if row is None else token_record(row)


def list_tokens(conn: sqlite3.Connection, tenant: str | None) -> list[TokenRecord]:
    query = f"SELECT {TOKEN_COLUMNS} FROM tokens"  # noqa: S608
    if tenant is None:
        rows = conn.execute(query + " ORDER BY created_ms, token_id").fetchall()
    else:
        rows = conn.execute(query + " WHERE tenant = ? ORDER BY created_ms, token_id", (tenant,)).fetchall()
    return [token_record(r) for r in rows]


def sealed_seed_samples(conn: sqlite3.Connection) -> list[tuple[str, bytes]]:
    """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal)."""
    rows = conn.execute(
        "SELECT MIN(hand_id), substr(sealed_seed, 2, 4) FROM hands WHERE state != 3 "
        "GROUP BY substr(sealed_seed, 2, 4)"
    ).fetchall()
    out = []
    for hand_id, _ in rows:
        sealed = conn.execute("SELECT sealed_seed FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()
        out.append((str(hand_id), bytes(sealed[0])))
    return out


def get_meta(conn: sqlite3.Connection, name: str) -> str | None:
    row = conn.execute("SELECT value FROM fairdeck_meta WHERE name = ?", (name,)).fetchone()
    return None if row is None else str(row[0])


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
        raise unreadable(path, e) from None
    try:
        count = conn.execute("SELECT COUNT(*) FROM log_entries").fetchone()[0]
        notes = [bytes(r[0]) for r in conn.execute("SELECT note FROM checkpoints ORDER BY size")]
        notes += [
            str(r[0]).encode()
            for r in conn.execute(
                "SELECT value FROM fairdeck_meta WHERE name LIKE 'log_key_rotation/%' ORDER BY name"
            )
        ]
    except sqlite3.Error as e:
        conn.close()
        raise unreadable(path, e) from None

    def pages() -> Iterator[tuple[int, bytes]]:
        start = 0
        while True:
            page = conn.execute(
                "SELECT idx, entry FROM log_entries WHERE idx >= ? ORDER BY idx LIMIT ?", (start, PAGE)
            ).fetchall()  # all of it: the read transaction ends here
            yield from page
            if len(page) < PAGE:
                return
            start = int(page[-1][0]) + 1

    def entries() -> Iterator[bytes]:
        try:
            yield from entries_in_order(pages())
        except sqlite3.Error as e:
            raise unreadable(path, e) from None
        finally:
            conn.close()

    return count, notes, entries()


CODEAL_KINDS = tuple(b"FDL1" + bytes([kind]) for kind in range(3, 8))
"""The first five bytes of each co-dealt entry (fairdeck.codeal.entries: types 3 to 7)."""


def first_codeal_entry(path: Path) -> int | None:
    """The index of the log's first co-dealt entry, or None (none, or no log yet): the evidence that
    co-dealt hands were dealt, read before a missing codeal.db is made (codeal_store.check_record).
    Read-only, one scan in log order that stops at the first; ``LogUnreadable`` names the file."""
    row = _log_row(
        path,
        "SELECT idx FROM log_entries WHERE substr(entry, 1, 5) IN (?, ?, ?, ?, ?) ORDER BY idx LIMIT 1",
        CODEAL_KINDS,
    )
    return None if row is None else int(row[0])


def log_entry_at(path: Path, index: int) -> bytes | None:
    """The log's entry at ``index``, or None (no such entry, or no log yet): read-only, one row,
    for an older codeal.db's hands checked against the log they name (codeal_record.py);
    ``LogUnreadable`` names the file."""
    row = _log_row(path, "SELECT entry FROM log_entries WHERE idx = ?", (index,))
    return None if row is None else bytes(row[0])


def _log_row(path: Path, query: str, params: tuple[object, ...]) -> tuple[Any, ...] | None:
    """The first row of ``query`` on the log's database, opened read-only; None when there is no
    log yet (no file, an empty one, no log table); ``LogUnreadable`` names the file."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if conn.execute("SELECT name FROM sqlite_master WHERE name = 'log_entries'").fetchone() is None:
                return None
            row: tuple[Any, ...] | None = conn.execute(query, params).fetchone()
            return row
        finally:
            conn.close()
    except (sqlite3.Error, OverflowError, ValueError) as e:
        raise LogUnreadable(f"cannot read the log of database {path}: {e}") from None
