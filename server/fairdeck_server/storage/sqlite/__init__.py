"""The embedded engine: SQLite in WAL mode with synchronous=FULL and group commit, split by job
as the PostgreSQL engine is (tests/test_storage_layout.py pins the shape).

- ``schema``: the tables, and opening (or, only when told, creating) a database file;
- ``writer``: every statement that writes, and the log's tail (size, frontier) appends go to;
- ``reader``: every statement that reads, and ``read_log``, the read-only view of the log for
  ``fairdeck audit --data``;
- ``diagnosis``: what a driver error means, in one line with its fix;
- ``batches``: the threads that run them in fair batches (the writer's group commit, the reader);
- ``engine``: ``SqliteStorage``, the Storage interface, gluing them (no SQL);
- SQLite's own: ``handoff`` (operations handed from event loops to those threads) and
  ``writer_lock`` (the writers' flock of ``serve --processes N``).
"""

from __future__ import annotations

from fairdeck_server.storage.sqlite.engine import SqliteStorage
from fairdeck_server.storage.sqlite.reader import first_codeal_entry, log_entry_at, read_log
from fairdeck_server.storage.sqlite.schema import SCHEMA, create_database

__all__ = ["SCHEMA", "SqliteStorage", "create_database", "first_codeal_entry", "log_entry_at", "read_log"]
