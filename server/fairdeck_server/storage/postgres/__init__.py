"""The server engine: PostgreSQL, shared by any number of dealer replicas, split by job.

- ``schema``: tables, indexes, the log's append function (PL/pgSQL), the schema version;
- ``writer``: group commit, the batch planner, the one statement that appends a batch to the log
  (docs/scaling.md, "The PostgreSQL writer");
- ``engine``: ``PostgresStorage``, the Storage interface (connections, start-up checks, reads,
  tokens, checkpoints); its writes go to the writer;
- ``reader``: ``read_log``, the read-only view of the log for ``fairdeck audit --db``.

Importing it imports psycopg (the ``postgres`` extra): the dealer does so only for a
``--db postgresql://`` URL (``fairdeck_server.storage.open_storage``).
"""

from __future__ import annotations

from fairdeck_server.storage.postgres.engine import PostgresStorage
from fairdeck_server.storage.postgres.reader import read_log
from fairdeck_server.storage.postgres.schema import SCHEMA, SCHEMA_VERSION

__all__ = ["SCHEMA", "SCHEMA_VERSION", "PostgresStorage", "read_log"]
