"""Operations handed from event loops to a storage thread (the writer, the reader), and back.

An event loop hands over what it submitted in one turn at once (one put, at most one wake-up of
the thread); the thread resolves the futures of a batch with one wake-up per loop. Each operation
carries whose work it is and its cost, for the thread's fair turns (fair.py). While another
tenant's light operations are handed over and not settled, ``give_way(tenant)`` on a loop lets
the storage thread have the interpreter lock (UnderWay). No grpc.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fairdeck_server import fair, refusals

T = TypeVar("T")


class Op:
    """An operation queued for a storage thread: its function, the loop awaiting it and its
    future, whose work it is and its cost (fair.py). A plain creation of hands (no request id:
    nothing to read, nothing to refuse) also has ``rows``, which only queues its rows, so that a
    batch writes those of all its creations with one set of INSERTs."""

    __slots__ = ("cost", "fn", "fut", "loop", "quiet", "rows", "whose")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        loop: asyncio.AbstractEventLoop,
        fut: asyncio.Future[Any],
        whose: str,
        cost: int,
        rows: Callable[[Any], Any] | None,
        quiet: bool = False,
    ) -> None:
        self.fn, self.loop, self.fut, self.whose, self.cost, self.rows = fn, loop, fut, whose, cost, rows
        self.quiet = quiet
        """Its failure is not logged (health's probe: health says what changed)."""


class UnderWay:
    """How many light operations (a unary call's: one hand, a read) are handed to a storage
    thread and not yet settled, by tenant, and ``give`` for the event loop: while another
    tenant's (or the dealer's own) are, it drops the interpreter lock and takes it back.

    A storage thread needs the GIL back after every database call (sqlite3 releases it around
    each); an event loop kept busy by one tenant's calls holds it up to the switch interval
    (5 ms) each time, so another tenant's one-hand batch took 10-24 ms of wall time for under
    2 ms of CPU under a GetHand flood. ``time.sleep(0)`` releases the GIL, and a thread waiting
    for it takes it then. Not for a tenant's own operations (each give costs a switch: giving to
    everyone cost the Deal path a fifth of its throughput) nor for bulk slices (every call would
    wait for a slice's Python). With nothing under way, ``give`` compares two integers."""

    __slots__ = ("_by", "_lock", "given", "ops")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ops = 0
        self._by: dict[str, int] = {}
        self.given = 0
        """Times ``give`` let the lock go (a diagnostic)."""

    def handed(self, ops: Sequence[Op]) -> None:
        self._count(ops, 1)

    def settled(self, ops: Sequence[Op]) -> None:
        self._count(ops, -1)

    def _count(self, ops: Sequence[Op], sign: int) -> None:
        light = [op.whose for op in ops if op.cost <= LIGHT]
        if not light:
            return
        with self._lock:
            self.ops += sign * len(light)
            for whose in light:
                n = self._by.get(whose, 0) + sign
                if n:
                    self._by[whose] = n
                else:
                    del self._by[whose]

    def give(self, tenant: str) -> None:
        """On an event loop, between calls of ``tenant``."""
        if self.ops > self._by.get(tenant, 0):
            self.given += 1
            # time.sleep releases the GIL around its system call and takes it back. Under
            # libfaketime (tests/faults) that call can fail with EINVAL, after the GIL went: the
            # lock was given all the same, and a call must not fail for it.
            with contextlib.suppress(OSError):
                time.sleep(0)


LIGHT = fair.LIGHT
"""The most hands an operation writes and still counts as light (UnderWay)."""
UNDER_WAY = UnderWay()
"""The process's one count: the interpreter lock is the process's too."""


def give_way(tenant: str) -> None:
    """Between calls of ``tenant``, on an event loop: let a storage thread with others' work
    under way go on."""
    UNDER_WAY.give(tenant)


class OpQueue:
    """The loops' side of a storage thread: ``submit``, and the queue the thread reads
    (lists of operations; None: stop)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[list[Op] | None] = queue.SimpleQueue()
        self._pending: dict[asyncio.AbstractEventLoop, list[Op]] = {}
        """Operations submitted in the current turn of each loop, handed over at its end."""
        self._closed = False

    async def submit(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        cost: int = 1,
        rows: Callable[[Any], T] | None = None,
        quiet: bool = False,
    ) -> T:
        """Run ``fn`` on the thread, in a batch, in its tenant's turn (fair.current()); ``cost``:
        hands it writes, for the turns. ``rows``: for a plain creation, what queues its rows, run
        instead of ``fn`` when the batch writes creations together. ``quiet``: its failure is not
        logged."""
        if self._closed:
            raise refusals.storage_unavailable("storage is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:  # the first of this turn: hand them all over at its end
            pending = self._pending[loop] = []
            loop.call_soon(self._flush, loop)
        pending.append(Op(fn, loop, fut, fair.current(), cost, rows, quiet))
        return await fut

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the operations a loop submitted in one turn to the thread: one hand-off (and at
        most one wake-up of the thread) per turn, not one per operation."""
        ops = self._pending.pop(loop, None)
        if not ops:
            return
        if self._closed:  # submitted before close() on another loop, flushed after it
            failure = refusals.storage_unavailable("storage is closed")
            _resolve([(op.fut, False, failure) for op in ops])
            return
        UNDER_WAY.handed(ops)
        self._queue.put(ops)


def settle(batch: Sequence[Op], outcomes: Sequence[tuple[bool, Any]]) -> None:
    """Resolve each operation's future with its outcome, on its own loop: one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
    try:
        for op, (ok, value) in zip(batch, outcomes, strict=True):
            by_loop.setdefault(op.loop, []).append((op.fut, ok, value))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_resolve, items)
    finally:
        UNDER_WAY.settled(batch)


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in items:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
