"""The reaper: every hand is voided before its lifetime passes in the log's own time.

The audit calls a hand overdue when the log holds a later entry more than the lifetime after it
(docs/log-format.md, "Overdue hands"). So the dealer voids a hand once it has been open
``lifetime - margin`` on its clock (``margin`` = min(2 s, lifetime / 4)), in rounds every
``margin / 2``, and an operation that logs an entry first makes sure a round finished within the
last ``margin / 2`` (``ensure_fresh``). After anything that kept the reaper from running (a
paused process, a stalled event loop, the start after a downtime) the first entry waits for one
round; otherwise it waits for nothing. A hand whose row cannot be read or whose seed does not open
is skipped, counted and reported once (``Dealer.void_stale``); the others are voided all the same.

Times are the dealer's clock (clock.py): monotonic while the process runs, so a wall-clock step
voids nothing early.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fairdeck_server.dealer import Dealer

log = logging.getLogger(__name__)

MAX_MARGIN_MS = 2000
MIN_PERIOD_S = 0.01
"""Rounds are never closer than this (a lifetime of milliseconds, in tests): the freshness check
before each entry still holds them to the margin."""


class Reaper:
    """Rounds of ``Dealer.void_stale``: on a schedule, and on demand before an entry is logged."""

    def __init__(
        self,
        dealer: Dealer,
        lifetime_s: float,
        clock_ms: Callable[[], int],
        on_skip: Callable[[str, str, str], None] = lambda tenant, hand_id, reason: None,
    ) -> None:
        self.dealer = dealer
        self.lifetime_ms = max(1, int(lifetime_s * 1000))
        self.margin_ms = max(1, min(MAX_MARGIN_MS, self.lifetime_ms // 4))
        self.period_s = max(MIN_PERIOD_S, self.margin_ms / 2000)
        self.clock_ms = clock_ms
        self.on_skip = on_skip
        self.voided_at_ms: int | None = None
        """The dealer's time when the last complete round began: every hand created before then
        minus ``lifetime - margin`` is closed, voided or skipped."""
        self._lock = asyncio.Lock()

    def fresh(self) -> bool:
        done = self.voided_at_ms
        return done is not None and self.clock_ms() - done <= self.margin_ms // 2

    async def ensure_fresh(self) -> None:
        """Return at once if a round finished recently; otherwise run one (or wait for the one
        running). Storage failing (STORAGE_UNAVAILABLE) is raised: nothing can be logged then."""
        if not self.fresh():
            await self.round()

    async def round(self) -> None:
        """Void every hand open longer than ``lifetime - margin``, in batches, until none is left."""
        async with self._lock:
            if self.fresh():  # another caller's round just finished
                return
            began = self.clock_ms()
            while await self.dealer.void_stale(self.lifetime_ms - self.margin_ms, on_skip=self.on_skip) > 0:
                pass
            self.voided_at_ms = began

    async def run(self) -> None:
        """Rounds every ``period_s`` until cancelled; a failed round is logged and tried again."""
        while True:
            try:
                await self.round()
            except Exception as e:  # storage may be down for a while; try again next round
                log.error("voiding stale hands failed: %s", type(e).__name__)
            await asyncio.sleep(self.period_s)
