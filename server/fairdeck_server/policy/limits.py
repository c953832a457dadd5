"""Abuse limits per tenant, as policies that import no grpc: a request rate (``RateLimiter``) and
a number of open hands (``OpenHandsCap``, counted from storage through a per-tenant cache, so it
holds across restarts: exact within one replica, its ``--processes`` included, approximate across
several). Each answers "go" (None) or the seconds after which trying again can succeed; the edge
makes that RESOURCE_EXHAUSTED with a RetryInfo (docs/operations.md, "Limits").

>>> bucket = RateLimiter(rate=1.0, burst=2, clock=lambda: 0.0)
>>> bucket.acquire("a"), bucket.acquire("a"), bucket.acquire("a")
(None, None, 1.0)
>>> bucket.acquire("b") is None
True
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fairdeck_server.policy.ahead import AHEAD, ReadsAhead
from fairdeck_server.policy.group_counts import HANDS, OPENED, GroupCounts

log = logging.getLogger(__name__)


MAX_TENANTS = 100_000
"""Buckets and counts kept in memory at most; idle ones are dropped first."""


PACE_AT_ONCE = 64
"""Calls of one tenant that start at once while tenants share (RateLimiter.pace)."""
PACE_RATE = 1.0
"""A tenant's burst is served at this many times its sustained rate while tenants share."""


class RateLimiter:
    """A token bucket per tenant: ``burst`` calls at once, ``rate`` per second sustained."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_pace: Callable[[float], None] | None = None,
    ) -> None:
        self.rate = rate
        self.burst = float(max(burst, 1))
        self._clock = clock
        self._on_pace = on_pace
        """Told each paced call's wait as it begins (the metrics)."""
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when)
        self._due: dict[str, float] = {}  # tenant -> when its next call may start (``pace``)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def acquire(self, tenant: str, cost: float = 1.0) -> float | None:
        """Take ``cost`` tokens (at most the burst, so that any call can pass): None when
        allowed, else seconds until they are there."""
        if not self.enabled:
            return None
        cost = min(cost, self.burst)
        now = self._clock()
        tokens, when = self._buckets.get(tenant, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        if tokens >= cost:
            self._buckets[tenant] = (tokens - cost, now)
            if len(self._buckets) > MAX_TENANTS:
                self._forget_idle(now)
            return None
        self._buckets[tenant] = (tokens, now)
        return (cost - tokens) / self.rate

    def pace(self, tenant: str, cost: float = 1.0, most: float = math.inf) -> float:
        """Seconds a call that ``acquire`` let through waits before it starts, while tenants
        share the dealer: a tenant's calls start at most PACE_AT_ONCE at once and then at its
        rate (the generic cell rate algorithm, ITU-T I.371: one theoretical arrival time per
        tenant). Its burst is still served, none of it refused, but spread over about
        ``burst / rate`` seconds instead of all at once. A wait over ``most`` takes no place:
        the caller refuses that call instead."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        interval = 1.0 / (self.rate * PACE_RATE)
        due = max(self._due.get(tenant, now), now)
        wait = max(0.0, due - PACE_AT_ONCE * interval - now)
        if wait <= most:
            self._due[tenant] = due + min(cost, self.burst) * interval
            if len(self._due) > MAX_TENANTS:
                self._due = {t: at for t, at in self._due.items() if at > now}
        return wait

    async def paced(self, tenant: str, cost: float, wait: float) -> None:
        """Wait ``wait`` seconds, what ``pace`` answered. A call cancelled meanwhile (its client
        gave up) never started: its place goes back, or the tenant's later calls would wait
        behind calls that never ran, and with a short deadline be refused for them."""
        if self._on_pace is not None:
            self._on_pace(wait)
        try:
            await asyncio.sleep(wait)
        except BaseException:
            due = self._due.get(tenant)
            if due is not None:
                self._due[tenant] = due - min(cost, self.burst) / (self.rate * PACE_RATE)
            raise

    def _forget_idle(self, now: float) -> None:
        """Drop the buckets that have refilled (forgetting them changes nothing)."""
        full = [
            t
            for t, (tokens, when) in self._buckets.items()
            if tokens + (now - when) * self.rate >= self.burst
        ]
        for tenant in full:
            del self._buckets[tenant]


@dataclass
class _Count:
    open: int
    """Open hands as last read from storage, plus those reserved since."""
    read_at: float
    in_flight: int = 0
    """Hands reserved by calls still running (maybe not yet visible to a count)."""
    reading: bool = False
    """A count is being read from storage now."""
    ended: int = 0
    """Hands of calls that ended while that count was read: storage's snapshot may have been
    taken before they were written (the SQLite reader's thread), so they are counted too."""
    base: int = 0
    """With a group (``serve --processes N``): the stored count, plus the hands every process's
    calls held when it was read, less every process's OPENED then (group_counts.py); the open
    hands now are this plus every process's OPENED now."""


class OpenHandsCap:
    """At most ``limit`` open hands per tenant, counted from storage.

    The count is read from storage at most every ``ttl`` seconds per tenant
    (ahead of time, in the background, once it is 0.8 of that old and the
    tenant calls: ahead.py; and again, at most every ``min_reread``, before refusing), and every
    admitted call adds what it asked for at once, so a burst on one replica
    cannot overshoot. Calls still running when a count is read are added to
    it, since storage may not show their hands yet: the count errs high,
    which the next read corrects. Closed and voided hands free their slots
    at the next read.
    """

    def __init__(
        self,
        count_open: Callable[[str], Awaitable[int]],
        limit: int,
        *,
        ttl: float = 1.0,
        min_reread: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        group: GroupCounts | None = None,
    ) -> None:
        self.limit = limit
        self.group = group
        """``serve --processes N``: the hands every process's calls hold while they run, shared
        (group_counts.py), so that a burst on two processes cannot both take the last slots."""
        self.ttl = ttl
        self.min_reread = min_reread
        self._count_open = count_open
        self._clock = clock
        self._counts: dict[str, _Count] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._ahead = ReadsAhead("open-hands count")

    def close(self) -> None:
        """Cancel the counts being read ahead (the dealer is stopping)."""
        self._ahead.cancel()

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    async def reserve(self, tenant: str, hands: int) -> float | None:
        """Admit ``hands`` new open hands: None (call ``release`` when the call ends),
        else the seconds after which to try again."""
        if not self.enabled or hands <= 0:
            return None
        count = self._counts.get(tenant)
        now = self._clock()
        if count is None or now - count.read_at >= self.ttl:
            count = await self._read(tenant)
        elif count.open + hands > self.limit and now - count.read_at >= self.min_reread:
            count = await self._read(tenant)  # maybe hands were closed since
        elif now - count.read_at >= self.ttl * AHEAD and not count.reading:
            # Read before it expires, so that no call of the tenant waits for it. Meanwhile the
            # count errs high (closed hands are seen at a read), never low: admitting is safe.
            self._ahead.start(tenant, lambda: self._read(tenant))
        if count.open + hands > self.limit:
            return self.ttl
        group = self.group
        if group is not None and not group.take(tenant, OPENED, hands, self.limit, count.base, (HANDS,)):
            return self.ttl
        count.open += hands
        count.in_flight += hands
        return None

    def release(self, tenant: str, hands: int, *, opened: bool = True) -> None:
        """The call that reserved ``hands`` ended: its hands are in storage now, or, when it
        failed (``opened`` False: refused, or storage did not take it), none of them is, and
        their slots are free at once rather than at the next read."""
        if self.group is not None and self.enabled and hands > 0:
            kinds = (HANDS,) if opened else (HANDS, OPENED)  # refused: it opened nothing
            self.group.give(tenant, hands, *kinds)
        count = self._counts.get(tenant)
        if count is not None and hands > 0:
            count.in_flight = max(0, count.in_flight - hands)
            if not opened:
                count.open = max(0, count.open - hands)
            elif count.reading:
                count.ended += hands

    async def _read(self, tenant: str) -> _Count:
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            count = self._counts.get(tenant)
            if count is not None and self._clock() - count.read_at < self.min_reread:
                return count  # another call just read it
            started = self._clock()
            if count is not None:
                count.reading, count.ended = True, 0
            # Every process's calls running and hands reserved, as the read begins: what they
            # open from now on is counted on top of it (``_Count.base``).
            held, opened = (0, 0) if self.group is None else self.group.totals(tenant, HANDS, OPENED)
            try:
                stored = await self._count_open(tenant)
            finally:
                if count is not None:
                    count.reading = False
            in_flight = count.in_flight if count is not None else 0
            ended = count.ended if count is not None else 0  # maybe not in ``stored``: errs high
            if count is None:
                if len(self._counts) >= MAX_TENANTS:
                    self._forget_idle()
                count = self._counts[tenant] = _Count(0, started)
            count.open = stored + in_flight + ended
            count.base = stored + held - opened
            count.read_at = started
            return count

    def _forget_idle(self) -> None:
        for tenant in [t for t, c in self._counts.items() if c.in_flight == 0]:
            del self._counts[tenant]
            self._locks.pop(tenant, None)
