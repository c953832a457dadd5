"""The read-only log sources of ``fairdeck audit --data DIR`` and ``--db URL``.

They read the dealer's own storage, so they live in the server package; the
client's audit command finds them through the ``fairdeck.audit_sources`` entry
point group. Each returns (entry count at the latest checkpoint, the signed
checkpoint notes, an iterator over the entries in index order). What cannot be
read raises the auditor's ``LogUnreadable`` (the command reports it as one
line, exit 2), never a traceback; damage found part way through the entries
too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fairdeck.log.audit import LogUnreadable

__all__ = ["data_log", "database_log"]

Source = tuple[int, list[bytes], Iterator[bytes]]


def data_log(data_dir: str) -> Source:
    """A data dir's SQLite log, read-only."""
    from fairdeck_server.storage.sqlite import read_log

    return read_log(Path(data_dir) / "fairdeck.db")


def database_log(url: str) -> Source:
    """The replicas' PostgreSQL log, read-only (a role that may only SELECT will do)."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise ValueError("--db must be a postgresql:// URL")
    try:
        import psycopg

        from fairdeck_server.storage.postgres import read_log
    except ImportError:
        raise LogUnreadable("--db needs the postgres extra: pip install 'fairdeck[postgres]'") from None
    try:
        count, notes, rows = read_log(url)
    except psycopg.Error as e:  # its text names the server and the cause, never the password
        raise LogUnreadable(f"cannot read the log: {str(e).strip().splitlines()[0]}") from None

    def entries() -> Iterator[bytes]:
        # The connection can also fail part way through the stream (a restart, a dropped link).
        try:
            yield from rows
        except psycopg.Error as e:
            raise LogUnreadable(f"cannot read the log: {str(e).strip().splitlines()[0]}") from None

    return count, notes, entries()
