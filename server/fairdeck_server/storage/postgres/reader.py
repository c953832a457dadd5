"""The read-only audit reader: a PostgreSQL log for ``fairdeck audit --db``.

It writes nothing and reads one snapshot; it needs neither the schema module nor
the writer, only psycopg and the row order both engines share (storage.base).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg

from fairdeck_server.storage.base import entries_in_order


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
