"""Reads made ahead of need: a cached value that a caller uses late in its life is read again in
the background, so that a tenant calling steadily never waits for its own token lookup or
open-hands count behind other tenants' reads in a storage thread's queue (docs/scaling.md,
"Reads ahead of need"). At most one read per key at a time; each task is kept until it ends
(the loop holds tasks weakly); a failed read is only logged at DEBUG, since the value then
expires and the next caller reads it and is told. No grpc.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fairdeck_server.log_causes import cause

log = logging.getLogger(__name__)

AHEAD = 0.8
"""A cached value older than this share of its time to live is read again when it is used: a
tenant calling steadily has its value read every 0.8-0.9 ttl instead of every ttl (25% more
reads), and the read has the last fifth of the ttl to come back before any call would wait."""


class ReadsAhead:
    """The background reads of one cache, by key."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    def start(self, key: str, read: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``read()`` in the background unless a read of ``key`` is under way already. It
        runs in the caller's context (its tenant's turn in the storage queues, its log fields)."""
        if key in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(read(), name=f"fairdeck-ahead-{self._what}")
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._ended(key, done))

    def _ended(self, key: str, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
        if not task.cancelled() and (e := task.exception()) is not None:
            log.debug("%s read ahead failed: %s", self._what, cause(e))

    def cancel(self) -> None:
        """Cancel the reads under way (the dealer is stopping)."""
        for task in self._tasks.values():
            task.cancel()
