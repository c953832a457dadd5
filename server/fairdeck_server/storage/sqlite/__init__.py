"""The embedded engine: SQLite in WAL mode with synchronous=FULL and group commit, split by job
as the PostgreSQL engine is.

- ``schema``: the tables, and opening (or, only when told, creating) a database file;
- ``writer``: the writer thread, group commit, and the log's size and frontier;
- ``engine``: ``SqliteStorage``, the Storage interface: writes on the writer, reads on the reader;
- ``reader``: the reader thread, and ``read_log``, the read-only view of the log for
  ``fairdeck audit --data``.
"""

from __future__ import annotations

from fairdeck_server.storage.sqlite.engine import SqliteStorage
from fairdeck_server.storage.sqlite.reader import read_log
from fairdeck_server.storage.sqlite.schema import SCHEMA, create_database

__all__ = ["SCHEMA", "SqliteStorage", "create_database", "read_log"]
