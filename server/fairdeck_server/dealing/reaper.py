"""The reaper: every hand is voided before its lifetime passes in the log's own time.

The audit calls a hand overdue when the log holds a later entry more than the lifetime after it
(docs/log-format.md, "Overdue hands"). So an entry may be logged at time T only once every hand
created before T - lifetime is closed. The reaper keeps a watermark, ``closed_before_ms``: every
hand created before it is closed, voided or skipped. It voids a hand once it has been open
``lifetime - margin`` (``margin`` = min(2 s, lifetime / 4)), in passes every ``margin / 4``, oldest
first, in batches charged to each hand's tenant (voids.py), and moves the watermark after every
batch. An operation that logs an entry first needs the watermark at ``now - lifetime + margin /
2`` (``ensure_fresh``): almost always it is there already; otherwise it waits only until the
hands older than that are voided, never for the rest of a pass. While it lags that by more than
BEHIND_MS, the reaper says it is behind (health NOT_SERVING: app.py). Times are the dealer's
clock (clock.py): monotonic while the process runs, so a wall-clock step voids nothing early.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fairdeck_server.dealing.voids import Voider

log = logging.getLogger(__name__)

MAX_MARGIN_MS = 2000
MIN_PERIOD_S = 0.01
"""Passes are never closer than this (a lifetime of milliseconds, in tests): the check before
each entry still holds them to the margin."""
CHUNK = 1024
"""Hands one step of a pass reads and voids (in slices, charged to their tenants) before the
watermark moves: what an entry waiting for the oldest hands waits for at most, per step."""
BEHIND_MS = 1000
"""How far the watermark may lag what an entry needs before the reaper says it is behind."""


class Reaper:
    """Passes of ``voider.void_before``: on a schedule, and on demand before an entry is logged
    (the dealer's ``before_logging`` is ``ensure_fresh``; the voider is not the dealer, so a pass
    never calls back into it)."""

    def __init__(
        self,
        voider: Voider,
        lifetime_s: float,
        clock_ms: Callable[[], int],
        on_skip: Callable[[str, str, str], None] = lambda tenant, hand_id, reason: None,
        on_behind: Callable[[bool], None] = lambda behind: None,
    ) -> None:
        self.voider = voider
        self.lifetime_ms = max(1, int(lifetime_s * 1000))
        self.margin_ms = max(1, min(MAX_MARGIN_MS, self.lifetime_ms // 4))
        self.period_s = max(MIN_PERIOD_S, self.margin_ms / 4000)
        self.clock_ms = clock_ms
        self.on_skip = on_skip
        self.on_behind = on_behind
        self.closed_before_ms: int | None = None
        """The watermark: every hand created before it (the dealer's clock) is closed, voided or
        skipped. None until the first pass ends (an entry waits for it)."""
        self.behind = False
        """The watermark lags what an entry needs by more than BEHIND_MS."""
        self.steps = 0
        """Steps of passes done (a diagnostic for tests)."""
        self.handled = 0
        """Hands voided (or skipped) by passes so far."""
        self._task: asyncio.Task[None] | None = None
        self._goal = 0
        """What the pass under way brings the watermark to."""
        self._moved: asyncio.Future[None] | None = None
        """Resolved, and replaced, whenever the watermark moves."""

    def need_ms(self) -> int:
        """Where the watermark must be before an entry is logged now: the lifetime before now,
        with ``margin / 2`` to spare for the time between this check and the entry's own time."""
        return self.clock_ms() - self.lifetime_ms + self.margin_ms // 2

    def goal_ms(self) -> int:
        """Where a pass brings it: every hand open ``lifetime - margin`` voided."""
        return self.clock_ms() - self.lifetime_ms + self.margin_ms

    def covers(self, target_ms: int) -> bool:
        done = self.closed_before_ms
        return done is not None and done >= target_ms

    def fresh(self) -> bool:
        return self.covers(self.need_ms())

    async def ensure_fresh(self) -> None:
        """Return at once if the watermark is where an entry needs it; otherwise wait until the
        hands older than that are voided. Storage failing (STORAGE_UNAVAILABLE) is raised:
        nothing can be logged then."""
        if not self.fresh():
            await self.reach(self.need_ms())

    async def round(self) -> None:
        """Void every hand open longer than ``lifetime - margin`` (at start, and in tests)."""
        await self.reach(self.goal_ms())

    async def reach(self, target_ms: int) -> None:
        """Return once the watermark is at ``target_ms``: a pass runs (one under way, or one
        started here) and this caller waits for the watermark to pass its target, not for the
        pass to end. A caller that gives up (its deadline) stops no pass."""
        while not self.covers(target_ms):
            task = self._task
            if task is None or task.done():
                self._goal = max(target_ms, self.goal_ms())
                task = self._task = asyncio.create_task(self._pass(self._goal), name="fairdeck-void-pass")
                task.add_done_callback(_retrieved)
            elif self._goal < target_ms:  # it stops short of this target: the next one goes on
                await asyncio.wait([task])
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
                continue
            if self._moved is None or self._moved.done():
                self._moved = asyncio.get_running_loop().create_future()
            await asyncio.wait([task, self._moved], return_when=asyncio.FIRST_COMPLETED)
            if task.done() and not self.covers(target_ms):
                task.result()  # what failed the pass

    async def _pass(self, goal_ms: int) -> None:
        """Void every hand created before ``goal_ms``, oldest first, a step at a time."""
        while not self.covers(goal_ms):
            progress = await self.voider.void_before(goal_ms, CHUNK, on_skip=self.on_skip)
            self.steps += 1
            self.handled += progress.handled
            self._advance(min(progress.closed_before_ms, goal_ms))

    def _advance(self, closed_before_ms: int) -> None:
        if self.closed_before_ms is None or closed_before_ms > self.closed_before_ms:
            self.closed_before_ms = closed_before_ms
            if self._moved is not None and not self._moved.done():
                self._moved.set_result(None)
        self.look()

    def look(self) -> bool:
        """Whether the watermark lags what an entry needs by more than BEHIND_MS; the change,
        if any, told to ``on_behind``."""
        done = self.closed_before_ms
        behind = done is not None and done < self.need_ms() - BEHIND_MS
        if behind != self.behind:
            self.behind = behind
            if behind:
                log.warning("voiding stale hands is behind: calls that log an entry wait for it")
            else:
                log.info("voiding stale hands caught up")
            self.on_behind(behind)
        return behind

    async def run(self) -> None:
        """Passes until cancelled: the next at once after one that voided something (a wave:
        the hands that went stale meanwhile), else after ``period_s``. A failed pass is logged
        and tried again."""
        try:
            while True:
                handled = self.handled
                try:
                    await self.reach(self.goal_ms())
                except Exception as e:  # storage may be down for a while; try again next time
                    log.error("voiding stale hands failed: %s", type(e).__name__)
                    handled = self.handled
                self.look()
                await asyncio.sleep(self.period_s if self.handled == handled else 0)
        finally:  # stopping: the pass under way ends too
            if self._task is not None:
                self._task.cancel()


def _retrieved(task: asyncio.Task[None]) -> None:
    """Its failure is raised to its waiters, if any; never 'never retrieved'."""
    if not task.cancelled():
        task.exception()
