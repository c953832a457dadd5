"""Storage engines behind one interface (base.Storage)."""

from __future__ import annotations

from pathlib import Path

from fairdeck_server.storage.base import Storage


def open_storage(db: str | None, data_dir: Path, *, pool_size: int = 8) -> Storage:
    """The engine for ``db``: a postgresql:// URL (holding at most ``pool_size``
    connections), or None for SQLite in ``data_dir``."""
    if db is None:
        from fairdeck_server.storage.sqlite import SqliteStorage

        return SqliteStorage(data_dir / "fairdeck.db")
    if db.startswith(("postgresql://", "postgres://")):
        from fairdeck_server.storage.postgres import PostgresStorage

        return PostgresStorage(db, min_size=min(2, pool_size), max_size=pool_size)
    raise ValueError("--db must be a postgresql:// URL (SQLite is the default, in the data dir)")
