"""Storage engines behind one interface (base.Storage)."""

from __future__ import annotations

from pathlib import Path

from fairdeck_server.refusal import StartupRefused
from fairdeck_server.storage.base import Storage


def open_storage(db: str | None, data_dir: Path, *, pool_size: int = 8, create: bool = False) -> Storage:
    """The engine for ``db``: a postgresql:// URL (holding at most ``pool_size``
    connections), or None for SQLite in ``data_dir``.

    ``create``: SQLite may make its database if missing. Off by default: only
    a fresh data dir gets a new database (fairdeck_server.startup); otherwise a
    missing one is refused, never silently replaced by an empty one.
    """
    if db is None:
        from fairdeck_server.storage.sqlite import SqliteStorage

        return SqliteStorage(data_dir / "fairdeck.db", create=create)
    if db.startswith(("postgresql://", "postgres://")):
        try:
            from fairdeck_server.storage.postgres import PostgresStorage
        except ImportError as e:
            raise StartupRefused(
                f"--db postgresql://...: the PostgreSQL driver ({e.name or 'psycopg'}) is not installed; "
                "pip install 'fairdeck[postgres]'"
            ) from None

        return PostgresStorage(db, min_size=min(2, pool_size), max_size=pool_size)
    raise ValueError("--db must be a postgresql:// URL (SQLite is the default, in the data dir)")
