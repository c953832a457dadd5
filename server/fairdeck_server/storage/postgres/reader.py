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
