"""Work that no tenant owns: the methods open to all (health, reflection), charged to the client
address that asks and, within it, to the connection (docs/scaling.md, "Fair shares"). No grpc.

``OpenStreams`` bounds the streams each client address holds open on them (health Watch,
reflection): at most ``limit``, except that a connection holding none may always open one, so
that a flood from an address cannot lock a tool behind the same address (a NAT, loopback) out.
``SharedPace`` serves a rate shared by all (reflection's answers) in fair turns: addresses take
turns by deficit round robin with a newcomer first (fair.FairQueue), and the connections of one
address take turns within its share, so a flood waits behind itself. Waiting costs no CPU: a
waiter is a future woken once, by the one timer set for when the next token is there; nothing
polls, whatever the number waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from fairdeck_server.fair import FairQueue


class OpenStreams:
    """Streams open per client address (``limit``; 0: no limit), and per connection.

    >>> streams = OpenStreams(1)
    >>> streams.enter("a", "a:1"), streams.enter("a", "a:1"), streams.enter("a", "a:2")
    (True, False, True)
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._by_address: dict[str, int] = {}
        self._by_connection: dict[str, int] = {}

    def held(self, address: str) -> int:
        return self._by_address.get(address, 0)

    def enter(self, address: str, connection: str) -> bool:
        """Count a stream in (True; call ``leave`` when it ends), or False: the address holds
        ``limit`` and this connection holds one already."""
        if self.limit <= 0:
            return True
        if self._by_connection.get(connection, 0) and self.held(address) >= self.limit:
            return False
        self._by_address[address] = self.held(address) + 1
        self._by_connection[connection] = self._by_connection.get(connection, 0) + 1
        return True

    def leave(self, address: str, connection: str) -> None:
        if self.limit <= 0:
            return
        for counts, key in ((self._by_address, address), (self._by_connection, connection)):
            left = counts.get(key, 0) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)


class SharedPace:
    """``rate`` turns a second after a burst of ``burst``, shared by every caller, handed out
    address by address and, within one, connection by connection (0: no pacing)."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(max(burst, 1))
        self._clock = clock
        self._tokens = self.burst
        self._when = clock()
        self._addresses: FairQueue[str] = FairQueue(1)
        """One item per waiter: its address, whose own queue says which connection goes next."""
        self._connections: dict[str, FairQueue[asyncio.Future[None]]] = {}
        self._waiting = 0
        """Waiters queued (a cancelled one until its turn comes: then it is skipped)."""
        self._timer: asyncio.TimerHandle | None = None
        self.wakeups = 0
        """Times the timer ran: one per token handed out, or fewer (the tests count them)."""

    def __len__(self) -> int:
        return self._waiting

    async def turn(self, address: str, connection: str) -> None:
        """Return when it is this caller's turn and a token is there (taken)."""
        if self.rate <= 0:
            return
        self._refill()
        if not self._waiting and self._tokens >= 1:
            self._tokens -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._addresses.push(address, address)
        self._connections.setdefault(address, FairQueue(1)).push(connection, turn)
        self._waiting += 1
        self._schedule()
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled():  # the token came as we were cancelled: back
                self._tokens = min(self.burst, self._tokens + 1)
                self._schedule()
            raise

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._when) * self.rate)
        self._when = now

    def _schedule(self) -> None:
        """The one timer, set for when the next token is there (none while nobody waits)."""
        if self._timer is not None or not self._waiting:
            return
        delay = max(0.0, (1.0 - self._tokens) / self.rate)
        self._timer = asyncio.get_running_loop().call_later(delay, self._hand_out)

    def _hand_out(self) -> None:
        self._timer = None
        self.wakeups += 1
        self._refill()
        while self._waiting and self._tokens >= 1:
            address = self._addresses.pop()
            assert address is not None  # one item per waiter
            line = self._connections[address]
            turn = line.pop()
            if not line:
                del self._connections[address]
            self._waiting -= 1
            if turn is None or turn.done():  # cancelled while it waited: no token spent
                continue
            self._tokens -= 1
            turn.set_result(None)
        self._schedule()
