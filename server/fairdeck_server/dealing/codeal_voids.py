"""Co-dealt hands end within the hand lifetime (``serve --max-hand-lifetime``), as ordinary ones do.

``CodealReaper`` reads, every ``period_s``, the rows of codeal.db not closed made (a hand: taken
from the pool) over ``lifetime - margin`` ago (reaper.py's margin), oldest first, CHUNK at a time.
A hand is voided: closed as CloseHand closes it, its row marked ``voided``, as work of the tenant
that opened it (fair.bind and a slot of the fair admission in its turn, never refused), one hand
at a time, tenants in turn. A pooled deck never taken is retired, its co-dealer told to end it,
then dropped; its (tenant, deck) gets no refills until that tenant opens one again. A closed hand
whose closing entries the log refused, with no CloseHand since for a margin, is logged here. A
co-dealer or storage down ends the pass (tried again after ``retry_s``); another refusal skips
that hand (``on_skip``), but SEATS_NOT_RELEASED (the co-dealer's hold has not passed, spec 9.3)
holds it back ``held_s``, then tries again: never a hot loop. A hand open past its whole lifetime
puts the reaper behind (``on_behind``). A co-dealer down delays co-dealt hands only. No grpc.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from fairdeck.wire import Reason
from fairdeck_server import fair, refusals
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.reaper import MAX_MARGIN_MS

log = logging.getLogger(__name__)

CHUNK = 256
"""Rows one pass reads; the next pass starts at once when it was full."""
DAY_MS = 86_400_000
"""The co-dealer's least retention of an ended hand (``codealer serve --keep-closed-days``)."""
RETRY_S = 1.0
"""After a pass the co-dealer (or storage) cut short, the next waits this long."""
HELD_S = 30.0
"""A hand whose void the co-dealer refused for its seats' releases is tried again this long after."""


class CodealReaper:
    def __init__(
        self,
        codeal: CodealDealer,
        lifetime_s: float,
        clock_ms: Callable[[], int],
        *,
        on_voided: Callable[[str], None] = lambda kind: None,
        on_skip: Callable[[str, str, str], None] = lambda tenant, hand_id, reason: None,
        on_behind: Callable[[bool], None] = lambda behind: None,
        retry_s: float = RETRY_S,
        held_s: float = HELD_S,
        admission: fair.Admission | None = None,
    ) -> None:
        self.codeal = codeal
        self.admission = admission
        """The dealer's call admission (its LimitsInterceptor's): each void takes a slot of it."""
        self.lifetime_ms = max(1, int(lifetime_s * 1000))
        self.margin_ms = max(1, min(MAX_MARGIN_MS, self.lifetime_ms // 4))
        self.period_s = max(0.01, self.margin_ms / 4000)
        self.clock_ms = clock_ms
        self.on_voided = on_voided
        self.on_skip = on_skip
        self.on_behind = on_behind
        self.retry_s = retry_s
        self.held_ms = max(1, int(held_s * 1000))
        self.held: dict[str, int] = {}
        """Hands whose void waits for the co-dealer's hold: hand id -> when to try it again (ms)."""
        self.skipped: set[str] = set()
        """Hands that cannot be voided (the co-dealer refused, a record does not verify)."""
        self.behind = False
        self.voided = 0
        """Hands voided and pooled decks retired so far."""
        self._task: asyncio.Task[None] | None = None

    async def round(self) -> int:
        """One pass: void the hands (retire the decks) made over ``lifetime - margin`` ago, up to
        CHUNK; how many rows it read. A co-dealer or storage down raises (DealerError), and so
        does a record this process no longer holds (it retires no pooled deck either)."""
        if (why := self.codeal.held_now()) is not None:
            raise refusals.storage_unavailable(why)
        store = self.codeal.store
        for hand_id in await asyncio.to_thread(store.retired, CHUNK):  # a retirement cut short
            await self._end_pooled(hand_id)
        now = self.clock_ms()
        cutoff = now - self.lifetime_ms + self.margin_ms
        self.held = {h: at for h, at in self.held.items() if at > now}
        rows = await asyncio.to_thread(store.stale, cutoff, CHUNK + len(self.skipped) + len(self.held))
        hands: dict[str, list[str]] = {}
        waiting = 0
        for tenant, pool_tenant, hand_id, deck in rows:
            if hand_id in self.skipped:
                continue
            if hand_id in self.held:  # its void waits for the co-dealer's hold: not in this pass
                waiting += 1
                continue
            if not tenant:
                if await asyncio.to_thread(store.retire_pooled, hand_id, self.clock_ms()):
                    await self._end_pooled(hand_id)
                    if self.codeal.pool is not None:
                        self.codeal.pool.forget(pool_tenant, deck)
                continue
            hands.setdefault(tenant, []).append(hand_id)
        for tenant, hand_id in _in_turn(hands):
            await self._void(tenant, hand_id)
        late = await asyncio.to_thread(store.unlogged, self.clock_ms() - self.margin_ms, CHUNK)
        for tenant, hand_id in late:  # closed, its entries refused by the log: logged now
            if hand_id not in self.skipped:
                await self._void(tenant, hand_id, "logged")
        return len(rows) + len(late) - len(self.skipped) - waiting

    async def _void(self, tenant: str, hand_id: str, kind: str = "hand") -> None:
        token = fair.bind(tenant)  # the tenant that opened it pays for its void
        admission = self.admission
        if admission is not None:  # in its turn at the admission, as its calls
            await admission.enter_work(tenant)
        try:
            row = await self.codeal.close(tenant, hand_id, voided=True)
        except refusals.DealerError as e:
            if e.reason == Reason.CODEALER_UNAVAILABLE or e.status is refusals.Status.UNAVAILABLE:
                raise
            if e.reason == Reason.SEATS_NOT_RELEASED:  # the co-dealer's hold has not passed yet
                if hand_id not in self.held:
                    log.info(
                        "co-dealt hand %s of tenant %s: the co-dealer holds its seed until its hold "
                        "passes (its seats did not release it); its void is tried again in %g s",
                        hand_id,
                        tenant,
                        self.held_ms / 1000,
                    )
                self.held[hand_id] = self.clock_ms() + self.held_ms
                return
            if await self._pruned_there(tenant, hand_id, e):
                await self.codeal.void_alone(tenant, hand_id)
                log.warning(
                    "co-dealt hand %s of tenant %s was ended and pruned by the co-dealer (it is past the "
                    "co-dealer's lifetime and retention): voided without its seed; its closing "
                    "entries cannot be logged",
                    hand_id,
                    tenant,
                )
                self.on_voided("gone")
                return
            self.skipped.add(hand_id)
            self.on_skip(tenant, hand_id, str(e.reason))
            return
        finally:
            if admission is not None:
                admission.leave_work(tenant)
            fair.unbind(token)
        if row.public.get("codealer_gone"):  # its close cut off, then pruned there: ended alone
            kind = "gone"
        elif kind == "hand":
            self.voided += 1
        self.on_voided(kind)

    async def _pruned_there(self, tenant: str, hand_id: str, error: refusals.DealerError) -> bool:
        """Whether the co-dealer says it has no such hand and may rightly have dropped it: the
        hand is older than the co-dealer's lifetime (it ended it) and a day (its least retention).
        Else (a co-dealer that lost its ledger, say) the hand is skipped, never closed here."""
        lifetime = self.codeal.codealer_lifetime_ms
        if not lifetime or not _no_such_hand(error):
            return False
        row = await self.codeal.get(tenant, hand_id)
        return self.clock_ms() - row.created_ms > lifetime + DAY_MS

    async def _end_pooled(self, hand_id: str) -> None:
        """The co-dealer ends the retired deck (its ledger may prune it), then it is dropped."""
        try:
            await self.codeal.link.reveal(hand_id)
        except refusals.DealerError as e:
            if e.reason == Reason.CODEALER_UNAVAILABLE:
                raise
            # the co-dealer never shuffled it or no longer has it: nothing of it to end there
        await asyncio.to_thread(self.codeal.store.drop_retired, hand_id)
        self.voided += 1
        self.on_voided("pooled")

    async def look(self) -> bool:
        """Whether a hand not skipped is open past its whole lifetime; a change told to ``on_behind``."""
        overdue = await asyncio.to_thread(
            self.codeal.store.stale, self.clock_ms() - self.lifetime_ms, len(self.skipped) + 1
        )
        behind = any(hand_id not in self.skipped for _, _, hand_id, _ in overdue)
        if behind != self.behind:
            self.behind = behind
            if behind:
                log.warning("voiding co-dealt hands is behind: a co-dealt hand is open past its lifetime")
            else:
                log.info("voiding co-dealt hands caught up")
            self.on_behind(behind)
        return behind

    async def run(self) -> None:
        """Passes until cancelled: at once after a full one, ``period_s`` after a short one,
        ``retry_s`` after one the co-dealer or storage cut short (said once per failure run)."""
        failing = False
        while True:
            wait = self.period_s
            try:
                if await self.round() >= CHUNK:
                    wait = 0
                failing = False
            except Exception as e:  # the co-dealer or storage down: the hands wait, nothing else does
                if not failing:
                    log.warning(
                        "voiding co-dealt hands failed (%s); retrying every %g s", _why(e), self.retry_s
                    )
                failing, wait = True, self.retry_s
            with contextlib.suppress(Exception):
                await self.look()
            await asyncio.sleep(wait)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="fairdeck-codeal-voids")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _in_turn(hands: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Each tenant's hands, oldest first, tenants taking turns one hand each."""
    order: list[tuple[str, str]] = []
    depth = max((len(ids) for ids in hands.values()), default=0)
    for i in range(depth):
        order.extend((tenant, ids[i]) for tenant, ids in hands.items() if i < len(ids))
    return order


def _no_such_hand(error: refusals.DealerError) -> bool:
    """The co-dealer's NOT_FOUND HAND_NOT_FOUND, as its link passes it on (or as it is, in process)."""
    said = f"{refusals.Status.NOT_FOUND.name} {Reason.HAND_NOT_FOUND}"
    return error.reason == Reason.HAND_NOT_FOUND or (
        error.reason == Reason.CODEALER_REFUSED and f"({said})" in str(error)
    )


def _why(error: Exception) -> str:
    return str(error) if isinstance(error, refusals.DealerError) else type(error).__name__
