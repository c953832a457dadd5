"""The server engine: PostgreSQL, shared by any number of dealer replicas, split by job as the
SQLite engine is (tests/test_storage_layout.py pins the shape).

- ``schema``: tables, indexes, the log's append function (PL/pgSQL), the schema version;
- ``writer``: every statement that writes, among them the one that appends a batch to the log
  (docs/scaling.md, "The PostgreSQL writer");
- ``reader``: every statement that reads, the log's check at start, and ``read_log``, the
  read-only view of the log for ``fairdeck audit --db``;
- ``diagnosis``: driver errors named by SQLSTATE, never by PostgreSQL's text;
- ``batches``: group commit and the batch planner (the writer's queue, in fair turns);
- ``engine``: ``PostgresStorage``, the Storage interface, gluing them (connections, no SQL).

Importing it imports psycopg (the ``postgres`` extra): the dealer does so only for a
``--db postgresql://`` URL (``fairdeck_server.storage.open_storage``).
"""

from __future__ import annotations

from fairdeck_server.storage.postgres.engine import PostgresStorage
from fairdeck_server.storage.postgres.reader import first_codeal_entry, log_entry_at, read_log
from fairdeck_server.storage.postgres.schema import SCHEMA, SCHEMA_VERSION

__all__ = ["SCHEMA", "SCHEMA_VERSION", "PostgresStorage", "first_codeal_entry", "log_entry_at", "read_log"]
