"""Who leads the log: the one dealer process that writes the tiles and talks to the witnesses.

``serve --tiles`` and witnesses each want one writer per log (docs/log-format.md, "Live tiles"):
two processes writing one tile directory, or each asking every witness on its own, would break
the invariants or the witnesses' request budget. The lease says which process that is:

- one process on SQLite: it always leads (the data dir's lock already makes it the only one);
- ``serve --processes N`` on SQLite: worker 0 leads. The supervisor holds the data dir's lock
  for the group and stops every worker when one dies, so there is never a second worker 0;
- PostgreSQL replicas: the holder of a session-level advisory lock leads. The lock lives on a
  connection of its own; when that connection or its process dies, PostgreSQL releases it and
  another replica takes it at its next try. ``held`` asks the server on every use, so a
  replica whose connection broke stops leading at its next checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Protocol

from fairdeck_server.log_causes import Repeats, cause

log = logging.getLogger(__name__)

LEAD_LOCK = 0x6664_6B03
"""pg_try_advisory_lock key of the log's leader (beside the schema and checkpoint locks)."""
CONNECT_TIMEOUT_S = 10


class Lease(Protocol):
    async def acquire(self) -> bool:
        """Try to become the leader (without waiting); True if this process leads now."""

    async def held(self) -> bool:
        """Whether this process still leads."""

    async def release(self) -> None:
        """Stop leading (at shutdown)."""


class FixedLease:
    """SQLite: whether this process leads is decided once, at start."""

    def __init__(self, leads: bool) -> None:
        self.leads = leads

    async def acquire(self) -> bool:
        return self.leads

    async def held(self) -> bool:
        return self.leads

    async def release(self) -> None:
        return None


class PostgresLease:
    """A session advisory lock, on a connection of its own, of the replicas' database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._held = False
        self._failures = Repeats(log)

    async def acquire(self) -> bool:
        import psycopg

        if self._held and await self.held():
            return True
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(
                    self.url,
                    autocommit=True,
                    application_name="fairdeck-lead",
                    connect_timeout=CONNECT_TIMEOUT_S,
                )
            cursor = await self._conn.execute("SELECT pg_try_advisory_lock(%s)", (LEAD_LOCK,))
            row = await cursor.fetchone()
        except psycopg.Error as e:
            self._failures.log(logging.WARNING, f"cannot ask PostgreSQL who leads the log: {cause(e)}")
            await self._drop()
            return False
        self._held = bool(row and row[0])
        return self._held

    async def held(self) -> bool:
        import psycopg

        if not self._held or self._conn is None or self._conn.closed:
            return False
        try:
            await self._conn.execute("SELECT 1")
        except psycopg.Error:
            log.warning("lost the connection that holds the log's lead; another replica may lead now")
            await self._drop()
            return False
        return True

    async def _drop(self) -> None:
        self._held = False
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    async def release(self) -> None:
        await self._drop()  # closing the session releases its advisory locks
