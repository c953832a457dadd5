"""Whether this dealer can deal co-dealt hands now: the health name ``CODEAL_HEALTH``.

Every ``EVERY`` seconds (``RETRY`` while failing) ``CodealerWatch`` asks the co-dealer for its
identity with the dealer's token. Co-dealt dealing is able only while the dealer's own codeal.db
takes a probe write, this process still holds its co-dealt record (``held``: on PostgreSQL, its
claim, dealing/codeal_claim.py) and the co-dealer answers, takes the token, names the pinned
``--codealer-key`` and passes ``also`` (its lifetime against the dealer's: edge/codealer_link.py);
``publish(ok)`` turns that into the health status (with the dealer's own, "") and
``fairdeck_codealer_healthy`` (edge/codealer_link.py). ``held`` is the very check co-dealt calls
make; a round is also due the moment the claim lapses (``lapses``), and Check reads ``held`` live
(the health gate, edge/codealer_link.py), so health is never SERVING while those calls are refused.
The ordinary mode's health does not depend on it. Each change is one log line, the cause said and
never the token. No grpc here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from fairdeck_server.refusals import DealerError

log = logging.getLogger(__name__)
CODEAL_HEALTH = "fairdeck.v1.DealerService/codeal"
"""The health service name of co-dealt dealing (docs/operations.md, "Health")."""
EVERY = 2.0
"""Seconds between identity checks while the co-dealer is fine."""
RETRY = 1.0
"""Seconds between them while it is not."""
HELD_TIMEOUT = 5.0
"""Seconds a round waits for ``held`` before it says it cannot confirm: the bound on one that blocks.
The dealer's (``CodealDealer.held_now``) only reads what the renewals' own thread left, so never does."""


class CodealerWatch:
    def __init__(
        self,
        identity: Callable[[], Awaitable[bytes]],
        pinned: bytes,
        publish: Callable[[bool], Awaitable[None]],
        *,
        every: float = EVERY,
        retry: float = RETRY,
        also: Callable[[], str | None] = lambda: None,
        probe: Callable[[], bool] | None = None,
        held: Callable[[], str | None] | None = None,
        held_timeout: float = HELD_TIMEOUT,
        lapses: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.held = held
        """Run in a thread each round: why this process no longer holds its co-dealt record, or None."""
        self.lapses = lapses
        """Seconds until ``held`` says the claim lapsed unless renewed meanwhile (None: no such
        deadline now): a round is due then, not up to ``every`` later."""
        self.held_timeout = held_timeout
        self._held: asyncio.Future[str | None] | None = None
        """A ``held`` still running past its round's wait: the next round waits for it, none is doubled."""
        self._claims: ThreadPoolExecutor | None = None
        """``held``'s own thread, first in each round: a renewal never queues behind shuffles."""
        self.probe = probe
        """A write to the dealer's own co-dealt hands file (codeal.db): False, no co-dealt draw
        can be recorded either."""
        self.identity = identity
        self.also = also
        """Asked after the identity matched: another reason co-dealt dealing cannot go on, or None."""
        self.pinned = pinned
        self.publish = publish
        self.every = every
        self.retry = retry
        self.cause: str | None = "not asked yet"
        """Why co-dealt dealing is not able now; None while it is."""
        self._task: asyncio.Task[None] | None = None

    async def check(self) -> str | None:
        """The reason the co-dealer cannot be used now, or None."""
        if self.held is not None and (lost := await self._holds(self.held)) is not None:
            return lost
        if self.probe is not None and not await asyncio.to_thread(self.probe):
            return "the dealer's codeal.db does not take writes: no co-dealt draw can be recorded"
        try:
            key = await self.identity()
        except DealerError as e:
            return str(e)
        if key != self.pinned:
            return "the co-dealer answered with another identity key than --codealer-key"
        return self.also()

    async def _holds(self, held: Callable[[], str | None]) -> str | None:
        if self._claims is None:
            self._claims = ThreadPoolExecutor(1, thread_name_prefix="fairdeck-codeal-claim")
        if self._held is None:
            self._held = asyncio.get_running_loop().run_in_executor(self._claims, held)
        done, _ = await asyncio.wait({self._held}, timeout=self.held_timeout)
        if not done:
            return (
                "cannot confirm that this process holds its co-dealt record: the database has not "
                f"answered its renewal for {self.held_timeout:g} s"
            )
        future, self._held = self._held, None
        return future.result()

    async def round(self) -> None:
        cause = await self.check()
        if cause != self.cause:
            if cause is None:
                log.info("the co-dealer answers with the pinned identity: co-dealt health SERVING")
            else:
                log.warning("co-dealt health NOT_SERVING: %s", cause)
            self.cause = cause
        await self.publish(cause is None)

    async def _run(self) -> None:
        while True:
            await self.round()
            pause, left = (self.every if self.cause is None else self.retry), self.lapses()
            if self.cause is None and left is not None:  # as the claim lapses, said at once
                pause = min(pause, max(0.0, left))
            await asyncio.sleep(pause)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fairdeck-codealer-health")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._claims is not None:
            self._claims.shutdown(wait=False)
