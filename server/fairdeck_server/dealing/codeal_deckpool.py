"""The co-dealt deck pool: decks pre-shuffled and pre-proved by the dealer and the co-dealer, kept
ready per (tenant, deck spec), refilled in the background in round-robin turns across tenants.
A deck is taken by ``CodealStore.take`` (one UPDATE), so it is never dealt twice, across restarts
too; the pool only makes decks (through the dealer it is given), never hands them out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Protocol

log = logging.getLogger(__name__)


class PoolDealer(Protocol):
    """What the pool needs of the co-dealt dealer (dealing/codeal_dealing.CodealDealer)."""

    store: Any
    misconfigured: str | None

    def held_now(self) -> str | None: ...
    async def make_hand(self, tenant: str, deck: str, *, pool_tenant: str = "") -> Any: ...


POOL_IDLE_S = 0.25
"""A refill starts only after this long without a co-dealt call (so it does not take the CPU from a
hand being dealt), unless the pool is below a quarter of its target, or empty (``urgent``)."""
POOL_RETRY_S = 1.0
"""After a refill fails (the co-dealer down, say), the pool waits this long before the next."""


class DeckPool:
    """Pre-shuffled, pre-proved co-dealt decks, refilled in the background, fairly across tenants.

    Each (tenant, deck) that opened a co-dealt hand gets ``per_tenant`` decks kept ready. Refills
    take turns round robin over the pairs below their target (one deck per turn, as a deficit
    round robin with a quantum of one deck), so one tenant's burst never keeps another's pool
    empty. Decks are made one at a time, off the hands' path; a deck is taken by
    ``CodealStore.take`` (one UPDATE), so it is never dealt twice, across restarts too.
    """

    def __init__(self, dealer: PoolDealer, per_tenant: int) -> None:
        self.dealer = dealer
        self.per_tenant = per_tenant
        self._order: list[tuple[str, str]] = []
        self._next = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_call = 0.0
        self.made = 0
        self.urgent = max(1, per_tenant // 4)
        """Below this many decks a refill does not wait for the dealer to be idle: a quarter of the
        target, and at least 1 (a pool of 1 to 3 that emptied under steady calls stayed empty)."""

    def forget(self, tenant: str, deck: str) -> None:
        """``tenant`` took no ``deck`` hand for a lifetime (its pooled decks were retired): no
        more refills for it until it opens one again (``wanted``)."""
        if (tenant, deck) in self._order:
            self._order.remove((tenant, deck))
            self._next = 0

    def wanted(self, tenant: str, deck: str) -> None:
        """``tenant`` opened a ``deck`` hand: keep its pool full."""
        if (tenant, deck) not in self._order:
            self._order.append((tenant, deck))
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _next_short(self) -> tuple[str, str] | None:
        """The next (tenant, deck) in turn whose pool is below its target, or None."""
        for i in range(len(self._order)):
            pair = self._order[(self._next + i) % len(self._order)]
            if await asyncio.to_thread(self.dealer.store.pooled, *pair) < self.per_tenant:
                self._next = (self._next + i + 1) % len(self._order)
                return pair
        return None

    def busy(self) -> None:
        """A co-dealt call ran: refills wait until the dealer is idle again."""
        self._last_call = time.monotonic()

    async def _idle(self, pair: tuple[str, str]) -> None:
        while (wait := self._last_call + POOL_IDLE_S - time.monotonic()) > 0:
            if await asyncio.to_thread(self.dealer.store.pooled, *pair) < self.urgent:
                return
            await asyncio.sleep(wait)

    async def _run(self) -> None:
        while True:
            pair = await self._next_short()
            if pair is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._idle(pair)
            if self.dealer.misconfigured is not None or self.dealer.held_now() is not None:  # said by
                # co-dealt health: no refill to fail
                await asyncio.sleep(POOL_RETRY_S)
                continue
            try:
                await self.dealer.make_hand("", pair[1], pool_tenant=pair[0])
                self.made += 1
            except Exception as e:  # the co-dealer down or refusing: try again later
                log.warning(
                    "co-dealt deck pool: a refill failed (%s); retrying in %g s",
                    type(e).__name__,
                    POOL_RETRY_S,
                )
                await asyncio.sleep(POOL_RETRY_S)
