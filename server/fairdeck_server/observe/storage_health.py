"""Whether storage takes writes, for the gRPC health service (``StorageHealth``).

After a storage fault the dealer makes one probe write of its own; if that fails too, health is
NOT_SERVING and the probe repeats every ``retry_seconds`` until any write (a client's or a probe)
succeeds. One failed request alone never flips health: it may be that request's own trouble.
``fairdeck_storage_healthy`` and ``fairdeck_storage_probes`` (metrics.py) show the same. The
design: docs/operations.md ("Health").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from fairdeck_server import fair
from fairdeck_server.log_causes import Repeats, cause
from fairdeck_server.observe import logging_setup

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0
"""While unhealthy, seconds between probe writes."""


class StorageHealth:
    """Tracks whether storage takes writes; ``on_change(healthy)`` is called on each flip.

    ``failed`` and ``wrote`` are called by MeteredStorage on the event loop, for
    every storage call that ends in a storage fault or a write that succeeded.
    """

    def __init__(
        self,
        probe: Callable[[], Awaitable[None]],
        on_change: Callable[[bool], None],
        *,
        on_probe: Callable[[bool], None] = lambda ok: None,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self.healthy = True
        self._probe = probe
        self._on_change = on_change
        self._on_probe = on_probe
        self._retry_seconds = retry_seconds
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._failures = Repeats(log)

    def failed(self) -> None:
        """A storage call failed: confirm with a probe write (unless one is under way)."""
        if self._stopped or (self._task is not None and not self._task.done()):
            return
        # The dealer's own work: its lines carry no request id of the call whose failure began it.
        self._task = logging_setup.own_task(self._probe_until_ok(), name="fairdeck-probe")

    def wrote(self) -> None:
        """A write was made durable: storage works."""
        self._set(True)

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _probe_until_ok(self) -> None:
        fair.bind(fair.SYSTEM)  # the dealer's own work, not that of the tenant whose call failed
        while not self._stopped:
            try:
                await self._probe()
            except Exception as e:  # what failing storage raises; logged without its text
                self._on_probe(False)
                self._failures.log(logging.WARNING, f"storage probe write failed: {cause(e)}")
                self._set(False)
                await asyncio.sleep(self._retry_seconds)
                continue
            self._on_probe(True)
            self._set(True)
            return

    def _set(self, healthy: bool) -> None:
        if healthy == self.healthy or self._stopped:
            return
        self.healthy = healthy
        if healthy:
            log.warning("storage takes writes again: SERVING")
        else:
            log.error("storage does not take writes: health NOT_SERVING until a write succeeds")
        self._on_change(healthy)
