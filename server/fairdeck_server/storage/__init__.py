"""Storage engines behind one interface (base.Storage)."""

from __future__ import annotations

import os
from pathlib import Path

from fairdeck_server.refusals import StartupRefused
from fairdeck_server.storage.base import Storage

WRITER_LOCK_NAME = "fairdeck.writer.lock"
"""The file the writers of ``serve --processes N`` take turns on (SQLite). The supervisor opens it
once and its workers lock that file through the inherited descriptor, never by this name again."""


def open_storage(
    db: str | None,
    data_dir: Path,
    *,
    pool_size: int = 8,
    create: bool = False,
    processes: int = 1,
    writer_lock_fd: int | None = None,
) -> Storage:
    """The engine for ``db``: a postgresql:// URL (holding at most ``pool_size``
    connections), or None for SQLite in ``data_dir``.

    ``create``: SQLite may make its database if missing. Off by default: only
    a fresh data dir gets a new database (fairdeck_server.run.startup); otherwise a
    missing one is refused, never silently replaced by an empty one.

    ``processes``: how many processes write this database (``serve --processes N``). With more
    than one, SQLite's writers take turns through a file lock that wakes the next at once;
    ``writer_lock_fd`` is that file as the supervisor opened it (``open_writer_lock``).
    """
    if db is None:
        from fairdeck_server.storage.sqlite import SqliteStorage

        writer_lock = data_dir / WRITER_LOCK_NAME if processes > 1 else None
        return SqliteStorage(
            data_dir / "fairdeck.db", create=create, writer_lock=writer_lock, writer_lock_fd=writer_lock_fd
        )
    if db.startswith(("postgresql://", "postgres://")):
        try:
            from fairdeck_server.storage.postgres import PostgresStorage
        except ImportError as e:
            raise StartupRefused(
                f"--db postgresql://...: the PostgreSQL driver ({e.name or 'psycopg'}) is not installed; "
                "pip install 'fairdeck[postgres]'"
            ) from None

        return PostgresStorage(db, min_size=min(2, pool_size), max_size=pool_size)
    raise StartupRefused("--db must be a postgresql:// URL (SQLite is the default, in the data dir)")


def open_writer_lock(data_dir: Path) -> int:
    """The writers' lock file of a ``serve --processes N`` group on SQLite, opened (made) once by
    its supervisor; its descriptor is inherited by every worker, replacements too. Raises OSError."""
    return os.open(data_dir / WRITER_LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
