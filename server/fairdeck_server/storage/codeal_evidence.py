"""Whether the dealer's log holds a co-dealt entry: the durable evidence that co-dealt hands were dealt.

The log's entries of types 3 to 7 (fairdeck.codeal.entries, docs/log-format.md) are appended only
by a dealer that records its co-dealt hands in DATA_DIR/codeal.db; a log holding one beside a
data dir without that file means the file was lost, never a first start (codeal_store.check_record).
Read-only, before the dealer's storage opens: SQLite through a read-only connection, PostgreSQL
through one short connection; one scan in log order that stops at the first co-dealt entry (a
log that has none is read whole, once: the first start with --codealer). A log not made yet has
none. A failure to read is a ``CodealEvidenceError`` whose message names the database, never a
password or an entry.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

_MAGIC = b"FDL1"
_KINDS = tuple(_MAGIC + bytes([kind]) for kind in range(3, 8))
"""The first five bytes of each co-dealt entry (setup, shuffle, shares, seeds, seals)."""


class CodealEvidenceError(Exception):
    """The log could not be read."""


def first_codeal_entry_sqlite(db: Path) -> int | None:
    """The index of the first co-dealt entry of the SQLite log ``db``, or None (none, or no log)."""
    if not db.is_file() or db.stat().st_size == 0:
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "log_entries" not in tables:
                return None
            row = conn.execute(
                "SELECT idx FROM log_entries WHERE substr(entry, 1, 5) IN (?, ?, ?, ?, ?) "
                "ORDER BY idx LIMIT 1",
                _KINDS,
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise CodealEvidenceError(f"database {db}: {e}") from None
    return None if row is None else int(row[0])


def first_codeal_entry_postgres(url: str) -> int | None:
    """The index of the first co-dealt entry of the PostgreSQL log at ``url``, or None."""
    import psycopg

    from fairdeck_server.storage.postgres.diagnosis import describe, what

    try:
        with psycopg.connect(url, autocommit=True, application_name="fairdeck-codeal-check") as conn:
            exists = conn.execute("SELECT to_regclass('log_entries') IS NOT NULL").fetchone()
            if not exists or not exists[0]:
                return None
            row = conn.execute(
                "SELECT idx FROM log_entries WHERE substring(entry FROM 1 FOR 5) IN (%s, %s, %s, %s, %s) "
                "ORDER BY idx LIMIT 1",
                _KINDS,
            ).fetchone()
    except psycopg.Error as e:
        raise CodealEvidenceError(f"the PostgreSQL database {describe(url)}: {what(e)}") from None
    return None if row is None else int(row[0])
