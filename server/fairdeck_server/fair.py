"""Fair turns between tenants, at every queue the dealer owns (docs/scaling.md, "Fair shares").

``FairQueue`` orders work by tenant: each tenant's work keeps its own order, and tenants take
turns by deficit round robin, a tenant that had nothing queued going first (the scheduling of
fq_codel, RFC 8290 section 4.2). A tenant with one call waiting is served before the next turn of
a tenant with a backlog, whatever that backlog, and a backlog is served in turns of ``quantum``
cost units (hands written, hands built, calls admitted). The same queue orders the storage
writers' batches, the dealer's CPU work (``CpuTurns``: DealHands builds its hands in slices that
each wait their turn) and admission (``Admission``: at most ``slots`` calls at work at once).

Whose work it is travels in a contextvar (``bind``, ``current``): the tenant once a call is
authenticated, ``@address`` before (a token lookup), ``""`` for the dealer's own work. No grpc.

>>> q = FairQueue(quantum=2)
>>> for i in range(4):
...     q.push("bulk", f"b{i}", 1)
>>> q.pop(), q.pop()
('b0', 'b1')
>>> q.push("one", "o0", 1)
>>> [q.pop() for _ in range(4)]
['o0', 'b2', 'b3', None]
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from typing import Generic, TypeVar

T = TypeVar("T")

SYSTEM = ""
"""Whose work the dealer's own is (the reaper, checkpoints, health probes)."""
_whose: ContextVar[str] = ContextVar("fairdeck_whose", default=SYSTEM)


def current() -> str:
    """Whose work the running code does."""
    return _whose.get()


def bind(key: str) -> Token[str]:
    return _whose.set(key)


def unbind(token: Token[str]) -> None:
    _whose.reset(token)


class _Flow(Generic[T]):
    __slots__ = ("deficit", "items", "key", "listed")

    def __init__(self, key: str) -> None:
        self.key = key
        self.items: collections.deque[tuple[int, T]] = collections.deque()
        self.deficit = 0
        self.listed = False
        """On the new or the old list."""


class FairQueue(Generic[T]):
    """Per-tenant FIFO queues, served deficit round robin with new tenants first.

    Not thread-safe: each user keeps it on one thread.
    """

    def __init__(self, quantum: int) -> None:
        self.quantum = max(1, quantum)
        self._flows: dict[str, _Flow[T]] = {}
        self._new: collections.deque[_Flow[T]] = collections.deque()
        self._old: collections.deque[_Flow[T]] = collections.deque()
        self._len = 0
        self.held_back = False
        """``take_turns`` ended the last batch before heavier work (it began light): the
        next batch may not end early again, or light work arriving before each batch would hold
        that tenant's turn back for ever."""

    def __len__(self) -> int:
        return self._len

    def tenants(self) -> int:
        """Tenants with work queued."""
        return sum(1 for f in self._flows.values() if f.items)

    def queued(self) -> list[str]:
        """The tenants with work queued: each is present now, however long ago it was queued."""
        return [key for key, f in self._flows.items() if f.items]

    def push(self, key: str, item: T, cost: int = 1) -> None:
        flow = self._flows.get(key)
        if flow is None:
            flow = self._flows[key] = _Flow(key)
        flow.items.append((max(1, cost), item))
        self._len += 1
        if not flow.listed:  # it had nothing queued: it goes first, with a full quantum
            flow.listed = True
            flow.deficit = self.quantum
            self._new.append(flow)

    def push_front(self, key: str, item: T, cost: int = 1) -> None:
        """Put ``item`` back at the head of ``key``'s queue (work taken out that must wait a turn)."""
        self.push(key, item, cost)
        flow = self._flows[key]
        flow.items.rotate(1)  # the item just pushed goes first

    def peek_cost(self) -> int | None:
        """The cost of what ``pop`` would give next (None: nothing queued)."""
        flow = self._next()
        return None if flow is None else flow.items[0][0]

    def pop(self) -> T | None:
        flow = self._next()
        if flow is None:
            return None
        cost, item = flow.items.popleft()
        flow.deficit -= cost
        self._len -= 1
        return item

    def _next(self) -> _Flow[T] | None:
        """The flow whose turn it is, with work and deficit left (lists updated on the way)."""
        while True:
            lst = self._new if self._new else self._old
            if not lst:
                return None
            flow = lst[0]
            if flow.deficit <= 0:  # its turn is used up: the back of the old list
                flow.deficit += self.quantum
                lst.popleft()
                self._old.append(flow)
                continue
            if not flow.items:
                lst.popleft()
                if lst is self._new:  # RFC 8290: an emptied new flow waits one round as old
                    self._old.append(flow)
                else:
                    flow.listed = False
                    del self._flows[flow.key]
                continue
            return flow

    def drop(self, key: str) -> list[T]:
        """Take out everything ``key`` has queued."""
        flow = self._flows.get(key)
        if flow is None:
            return []
        out = [item for _, item in flow.items]
        self._len -= len(out)
        flow.items.clear()
        return out


LIGHT = 1
"""The most cost (hands written) of light work: a unary call's. A DealHands slice is heavier
whatever its size: 16-hand slices (bulk.SHARED_SLICE) counted light against a 32-hand quantum
put a slice in the batch of every call that came after one (``take_turns``)."""


def take_turns(queue: FairQueue[T], *, alone: int, most: int) -> list[T]:
    """What one batch (one transaction of a storage writer) takes from ``queue``: with several
    tenants queued, one turn of each (a quantum of cost, so no batch grows long with one
    tenant's backlog while others wait); with one alone, its turns up to ``alone`` cost. At most
    ``most`` items, and always at least one when anything is queued. With several tenants, a
    batch that begins with light work (cost LIGHT: a call's one hand) ends before heavier work
    (a DealHands slice, of any size), which goes first in the next batch: the light call's
    caller waits for its own writes only, not for another tenant's slice written with them. Not
    twice in a row: the batch after one that ended early takes its turns whatever they weigh, so
    a stream of light calls (new tenants go first) cannot hold a slice back batch after batch."""
    tenants = queue.tenants()
    may_end_early = tenants > 1 and not queue.held_back
    queue.held_back = False
    budget = alone if tenants <= 1 else queue.quantum * tenants
    out: list[T] = []
    spent = 0
    light = False
    while len(out) < most:
        cost = queue.peek_cost()
        if cost is None or (out and spent + cost > budget):
            break
        if light and cost > LIGHT:
            queue.held_back = True
            break
        item = queue.pop()
        assert item is not None  # peek_cost saw it
        if not out:
            light = may_end_early and cost <= LIGHT
        out.append(item)
        spent += cost
    return out


class Sharing:
    """Whether tenants share a queue now: work of two or more tenants (the dealer's own aside)
    seen within the last ``window`` seconds. A storage writer lets a tenant alone fill long
    batches (its throughput) and keeps every batch to one turn of each while others come, even
    between their calls (their latency: a call arriving waits for the batch under way)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: dict[str, float] = {}
        self._pruned = float("-inf")
        self._latest: list[tuple[str, float]] = []
        """The last tenant seen and the last before it other than it, with when (``others``)."""

    def saw(self, whose: str, now: float) -> None:
        if whose == SYSTEM:
            return
        self._seen[whose] = now
        if self._latest and self._latest[0][0] != whose:
            self._latest = [(whose, now), self._latest[0]]
        else:
            self._latest[:1] = [(whose, now)]
        if now - self._pruned >= self.window:  # asked or not (admission without slots never asks)
            self._prune(now)

    def _prune(self, now: float) -> None:
        """Drop those seen long ago: once a window, so that the tenants kept are those of the
        last two windows at most."""
        self._seen = {k: at for k, at in self._seen.items() if now - at < self.window}
        self._pruned = now

    def shared(self, now: float) -> bool:
        """Asked on every call by admission: those seen long ago are dropped once a window, and
        the answer comes from the first two recent ones, not from a pass over every tenant."""
        if len(self._seen) < 2:
            return False
        if now - self._pruned >= self.window:
            self._prune(now)
        recent = 0
        for at in self._seen.values():
            if now - at < self.window:
                recent += 1
                if recent == 2:
                    return True
        return False

    def others(self, whose: str, now: float) -> bool:
        """Whether a tenant other than ``whose`` has been seen within the window (a DealHands
        stream is seen at each of its responses: Admission.saw). Asked on every call while a
        rate is set, so no pass over every tenant: the latest one other than ``whose`` is the
        last seen, or the one seen before it (``saw`` is told in time order)."""
        for k, at in self._latest:
            if k != whose:
                return now - at < self.window
        return False


class CpuTurns:
    """The dealer's CPU work in fair turns: ``await turns.run(cost, fn)`` runs ``fn`` when it is
    the caller's tenant's turn, then lets everything else ready on the event loop run before
    the next piece of anyone's work. One piece runs at a time, so a slice of work is never cut
    in the middle, and a call that is not waiting here (a unary call's own small work) runs
    between any two slices."""

    def __init__(self, quantum: int) -> None:
        self._queue: FairQueue[asyncio.Future[None]] = FairQueue(quantum)
        self._busy = False
        self.began = 0.0
        """When the piece under way began (``time.perf_counter``)."""

    async def run(
        self, cost: int, fn: Callable[[], T], *, then: Callable[[T], Awaitable[None]] | None = None
    ) -> T:
        """``fn()`` in the caller's tenant's turn; with ``then``, the turn is kept until
        ``then(result)`` has ended too (a DealHands slice's write, while tenants share)."""
        if self._busy or self._queue:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.push(current(), turn, cost)
            try:
                await turn
            except BaseException:
                if turn.done() and not turn.cancelled():  # our turn came as we were cancelled: pass it on
                    self._hand_over()
                raise
        self._busy = True
        self.began = time.perf_counter()
        try:
            result = fn()
            if then is not None:
                await then(result)
            return result
        finally:
            # The next piece waits for a turn of the loop: what is ready meanwhile runs first.
            asyncio.get_running_loop().call_soon(self._hand_over)

    def _hand_over(self) -> None:
        while True:
            turn = self._queue.pop()
            if turn is None:
                self._busy = False
                return
            if not turn.done():
                turn.set_result(None)
                return


class Admission:
    """At most ``slots`` calls at work at once; the others wait their tenant's turn.

    A tenant may have at most ``per_tenant`` calls admitted or waiting (``enter`` returns False
    past it: the caller refuses the call). ``enter`` returns once the call may run; ``leave``
    gives its slot to the next in fair order. While two or more tenants have called within
    SHARED_WINDOW, none takes more than ``most`` (``slots - slots // RESERVED_PART``) slots,
    held or waited for: the rest stay free for the others, whose next call then runs at once
    instead of waiting for a flooding tenant's slow call to end; its calls past that wait in its
    own line. A tenant alone may take every slot.
    """

    def __init__(self, slots: int, per_tenant: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = slots
        self.per_tenant = per_tenant
        reserved = max(0, slots) // RESERVED_PART
        self.most = slots - reserved if reserved else 0
        """Slots one tenant may hold or wait for at once while tenants share (0: no such bound)."""
        self._clock = clock
        self._sharing = Sharing(SHARED_WINDOW)
        self._active = 0
        self._queue: FairQueue[asyncio.Future[None]] = FairQueue(1)
        self._calls: dict[str, int] = {}
        self._entered: dict[str, int] = {}
        """Per tenant, calls holding a slot or waiting in ``_queue`` (more than ``most`` only
        if it took them while alone)."""
        self._lines: dict[str, collections.deque[asyncio.Future[None]]] = {}
        """Per tenant, calls waiting for one of its entered calls to leave."""

    @property
    def enabled(self) -> bool:
        return self.slots > 0 or self.per_tenant > 0

    def calls(self, tenant: str) -> int:
        return self._calls.get(tenant, 0)

    async def enter(self, tenant: str) -> bool:
        held = self._calls.get(tenant, 0)
        if self.per_tenant > 0 and held >= self.per_tenant:
            return False
        self._calls[tenant] = held + 1
        try:
            await self._take_slot(tenant)
        except BaseException:
            self._forget(tenant)
            raise
        return True

    def leave(self, tenant: str) -> None:
        self._forget(tenant)
        self._release_slot()
        self._step_out(tenant)

    async def enter_work(self, tenant: str) -> None:
        """A slot for work ``tenant`` left to the dealer (the void of a hand it abandoned): in its
        turns and within its share while tenants share, as its calls; never refused, and not
        counted in its calls (``per_tenant``), so its own voids never get its calls refused.
        ``leave_work`` gives the slot back."""
        await self._take_slot(tenant)

    def leave_work(self, tenant: str) -> None:
        self._release_slot()
        self._step_out(tenant)

    async def _take_slot(self, tenant: str) -> None:
        """Return once ``tenant`` is under its cap and holds a slot, in its turn."""
        self._sharing.saw(tenant, self._clock())
        await self._line_up(tenant)
        if self.slots <= 0 or (self._active < self.slots and not self._queue):
            self._active += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.push(tenant, turn)
        try:
            await turn  # the slot is handed over with the turn (``leave``)
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._release_slot()
            self._step_out(tenant)
            raise

    def saw(self, tenant: str) -> None:
        """A call of ``tenant``'s that takes no slot is under way (a DealHands stream, told at
        each response): while it runs its tenant shares the dealer like one that calls."""
        self._sharing.saw(tenant, self._clock())

    def others(self, tenant: str) -> bool:
        """Whether a tenant other than ``tenant`` has called within SHARED_WINDOW."""
        return self._sharing.others(tenant, self._clock())

    def _cap(self) -> int:
        """What one tenant may have entered now (0: no bound, it is alone)."""
        return self.most if self.most and self._sharing.shared(self._clock()) else 0

    async def _line_up(self, tenant: str) -> None:
        """Return once ``tenant`` is under its cap; counts this call in."""
        if not self.most:
            return
        entered = self._entered.get(tenant, 0)
        cap = self._cap()
        if not cap or entered < cap:
            self._entered[tenant] = entered + 1
            return
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines.setdefault(tenant, collections.deque()).append(place)
        try:
            await place  # handed over by one of its calls leaving (``_step_out``): counted in
        except BaseException:
            if place.done() and not place.cancelled():
                self._step_out(tenant)  # came as we were cancelled: pass it on
            raise

    def _step_out(self, tenant: str) -> None:
        """One of ``tenant``'s entered calls is done: the next in its line take its place, as
        many as its cap allows now (all of them once it is alone again)."""
        if not self.most:
            return
        entered = self._entered.get(tenant, 0) - 1
        line = self._lines.get(tenant)
        if line:
            cap = self._cap()
            while line and (not cap or entered < cap):
                place = line.popleft()
                if not place.done():  # a cancelled one is done: skipped
                    place.set_result(None)  # counted in here
                    entered += 1
            if not line:
                del self._lines[tenant]
        if entered > 0:
            self._entered[tenant] = entered
        else:
            self._entered.pop(tenant, None)

    def _forget(self, tenant: str) -> None:
        left = self._calls.get(tenant, 0) - 1
        if left > 0:
            self._calls[tenant] = left
        else:
            self._calls.pop(tenant, None)

    def _release_slot(self) -> None:
        if self.slots <= 0:
            self._active -= 1
            return
        while True:
            turn = self._queue.pop()
            if turn is None:
                self._active -= 1
                return
            if not turn.done():
                turn.set_result(None)  # the slot passes to it, _active unchanged
                return


RESERVED_PART = 4
"""While tenants share, a quarter of the admission slots stay free for tenants other than the
one holding the most."""
SHARED_WINDOW = 1.0
"""Seconds since another tenant's last call during which the admission slots are shared."""
