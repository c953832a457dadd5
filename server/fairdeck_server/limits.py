"""Abuse limits: a request rate and a number of open hands per tenant, and a
default deadline for every call.

A refused call ends with RESOURCE_EXHAUSTED, a stable ErrorInfo reason
(``RATE_LIMITED`` or ``TOO_MANY_OPEN_HANDS``) and a google.rpc.RetryInfo
saying when trying again can succeed. Health checks and reflection are never
limited: an orchestrator must always be able to ask whether we are alive.

The open-hands cap counts from storage, so it holds across restarts and
replicas, but through a per-tenant cache (``OpenHandsCap``): exact within one
replica, approximate across several (see docs/operations.md).

>>> bucket = RateLimiter(rate=1.0, burst=2, clock=lambda: 0.0)
>>> bucket.acquire("a"), bucket.acquire("a"), bucket.acquire("a")
(None, None, 1.0)
>>> bucket.acquire("b") is None
True
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from fairdeck_server import principal, refusals
from fairdeck_server.dealer import BATCH_CHUNK, MAX_BATCH_HANDS
from fairdeck_server.servicer import Malformed, abort, rewrap

if TYPE_CHECKING:  # generic in the stubs only
    ServerInterceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    ServerInterceptor = grpc.aio.ServerInterceptor

log = logging.getLogger(__name__)

UNLIMITED_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)
"""Never rate limited nor cut by the default deadline (Watch and reflection streams are long by design)."""

DEALER = "/fairdeck.v1.DealerService/"
OPENING_METHODS = frozenset({DEALER + "OpenHand", DEALER + "DealNewHand", DEALER + "DealHands"})
MAX_TENANTS = 100_000
"""Buckets and counts kept in memory at most; idle ones are dropped first."""


def service_of(method: str) -> str:
    """``/pkg.Service/Method`` -> ``pkg.Service``."""
    return method.lstrip("/").split("/", 1)[0]


STREAM_IN_FLIGHT = 2 * BATCH_CHUNK
"""Hands a DealHands call with ``close`` holds against the open-hands cap while it runs:
the chunk being written and the next one being stored (dealer.py ``_deal_chunks``)."""
MAX_PENDING_CALLS = 10_000
"""Calls gRPC may hold for the server before our handlers take them (see TRANSPORT_OPTIONS)."""
TRANSPORT_OPTIONS: tuple[tuple[str, int], ...] = (
    # gRPC core queues each new call until grpc.aio's accept loop takes it, one per turn
    # of the event loop. Past grpc.server.max_pending_requests (default 1,000, then
    # randomly up to the hard limit of 3,000) it drops calls: the client gets CANCELLED
    # with no message, and no handler, interceptor or metric ever sees them. 2,500
    # concurrent GetHand calls on one channel lost 282-432 that way. A queued call costs
    # little (its metadata and at most a flow-control window of request bytes) and waits
    # under its own deadline, so the queue is made large, with no random early drop.
    # A per-connection stream cap (grpc.max_concurrent_streams) is no cure: streams the
    # client opens before it reads the server's SETTINGS are reset (UNAVAILABLE).
    ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
    ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_CALLS),
)
"""gRPC server options for the transport's own queue of new calls."""


def hands_requested(method: str, request: object) -> int:
    """How many hands a call holds against the open-hands cap while it runs.

    DealHands holds ``hand_count``. With ``close`` its hands are closed when stored,
    but while the call runs they are work in flight: it holds up to STREAM_IN_FLIGHT,
    so a tenant cannot run more such streams at once than its cap allows (each makes
    the dealer produce hands until the client's flow-control window is full, read or
    not). A request that the servicer will refuse as malformed or out of range counts
    as nothing."""
    if method not in OPENING_METHODS or isinstance(request, Malformed):
        return 0
    if method == DEALER + "DealHands":
        count = int(getattr(request, "hand_count", 0))
        if not 1 <= count <= MAX_BATCH_HANDS:
            return 0
        return min(count, STREAM_IN_FLIGHT) if getattr(request, "close", False) else count
    return 1


class RateLimiter:
    """A token bucket per tenant: ``burst`` calls at once, ``rate`` per second sustained."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(max(burst, 1))
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def acquire(self, tenant: str) -> float | None:
        """Take one token: None when allowed, else seconds until one is available."""
        if not self.enabled:
            return None
        now = self._clock()
        tokens, when = self._buckets.get(tenant, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        if tokens >= 1.0:
            self._buckets[tenant] = (tokens - 1.0, now)
            if len(self._buckets) > MAX_TENANTS:
                self._forget_idle(now)
            return None
        self._buckets[tenant] = (tokens, now)
        return (1.0 - tokens) / self.rate

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


class OpenHandsCap:
    """At most ``limit`` open hands per tenant, counted from storage.

    The count is read from storage at most every ``ttl`` seconds per tenant
    (and again, at most every ``min_reread``, before refusing), and every
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
    ) -> None:
        self.limit = limit
        self.ttl = ttl
        self.min_reread = min_reread
        self._count_open = count_open
        self._clock = clock
        self._counts: dict[str, _Count] = {}
        self._locks: dict[str, asyncio.Lock] = {}

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
        if count.open + hands > self.limit:
            return self.ttl
        count.open += hands
        count.in_flight += hands
        return None

    def release(self, tenant: str, hands: int) -> None:
        """The call that reserved ``hands`` ended (its hands, if any, are in storage now)."""
        count = self._counts.get(tenant)
        if count is not None and hands > 0:
            count.in_flight = max(0, count.in_flight - hands)

    async def _read(self, tenant: str) -> _Count:
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            count = self._counts.get(tenant)
            if count is not None and self._clock() - count.read_at < self.min_reread:
                return count  # another call just read it
            started = self._clock()
            stored = await self._count_open(tenant)
            in_flight = count.in_flight if count is not None else 0
            if count is None:
                if len(self._counts) >= MAX_TENANTS:
                    self._forget_idle()
                count = self._counts[tenant] = _Count(0, started)
            count.open = stored + in_flight
            count.read_at = started
            return count

    def _forget_idle(self) -> None:
        for tenant in [t for t, c in self._counts.items() if c.in_flight == 0]:
            del self._counts[tenant]
            self._locks.pop(tenant, None)


Refusal = Callable[[str, str], None]
"""Told (tenant, reason) of every refused call: the metrics count them."""


class DeadlineInterceptor(ServerInterceptor):
    """Ends a call that runs longer than ``default_deadline`` seconds with
    DEADLINE_EXCEEDED (reason ``DEADLINE_EXCEEDED``); a client's shorter
    deadline ends it first anyway. Runs outside the auth interceptor so that a
    streaming call's writes count too: its streams are coroutines that write.

    What a cut call had made durable stays: DealHands chunks already stored
    are kept (their hands are voided in time, like a client that goes away).
    """

    def __init__(self, default_deadline: float) -> None:
        self.default_deadline = default_deadline

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None:
            return handler
        return self.wrap(details.method, handler)

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """This layer around ``handler`` for calls of ``method``; ``handler`` itself when it
        has nothing to do (no default deadline, or health and reflection)."""
        if self.default_deadline <= 0 or service_of(method) in UNLIMITED_SERVICES:
            return handler
        return rewrap(handler, self._unary, self._stream)

    def _unary(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            deadline = asyncio.timeout(self.default_deadline)
            try:
                async with deadline:
                    return await inner(request, context)
            except TimeoutError:
                if not deadline.expired():
                    raise
                await self._exceeded(context)

        return behavior

    def _stream(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            deadline = asyncio.timeout(self.default_deadline)
            try:
                async with deadline:
                    await drain(inner, request, context)
            except TimeoutError:
                if not deadline.expired():
                    raise
                await self._exceeded(context)

        return behavior

    async def _exceeded(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await abort(context, refusals.deadline_exceeded(self.default_deadline))


class LimitsInterceptor(ServerInterceptor):
    """Refuses calls over a tenant's rate or open-hands cap. Runs inside the
    auth interceptor, so ``principal.current()`` is the caller; its streams
    stay async generators, as the auth interceptor expects."""

    def __init__(
        self,
        rate: RateLimiter,
        cap: OpenHandsCap,
        *,
        on_refusal: Refusal | None = None,
        on_tenant: Callable[[str], None] | None = None,
    ) -> None:
        self.rate = rate
        self.cap = cap
        self._on_refusal = on_refusal
        self._on_tenant = on_tenant

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None:
            return handler
        return self.wrap(details.method, handler)

    @property
    def inert(self) -> bool:
        """Both limits off and nobody to tell the tenant: the layer would change nothing."""
        return not self.rate.enabled and not self.cap.enabled and self._on_tenant is None

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """This layer around ``handler`` for calls of ``method``; ``handler`` itself when it
        has nothing to do (health and reflection, or both limits off)."""
        if service_of(method) in UNLIMITED_SERVICES or self.inert:
            return handler
        return rewrap(
            handler, functools.partial(self._unary, method), functools.partial(self._stream, method)
        )

    def _unary(self, method: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            tenant = principal.current().tenant
            hands = await self._admit(method, tenant, request, context)
            try:
                return await inner(request, context)
            finally:
                self.cap.release(tenant, hands)

        return behavior

    def _stream(self, method: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            tenant = principal.current().tenant
            hands = await self._admit(method, tenant, request, context)
            try:
                result = inner(request, context)
                if not hasattr(result, "__aiter__"):
                    await result  # a coroutine that writes its responses itself
                    return
                try:
                    async for response in result:
                        yield response
                finally:
                    await result.aclose()
            finally:
                self.cap.release(tenant, hands)

        return behavior

    async def _admit(
        self, method: str, tenant: str, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> int:
        """The hands reserved for the call, or abort with RESOURCE_EXHAUSTED."""
        if self._on_tenant is not None:
            self._on_tenant(tenant)
        wait = self.rate.acquire(tenant)
        if wait is not None:
            await self._refuse(context, tenant, refusals.rate_limited(wait))
        hands = hands_requested(method, request)
        wait = await self.cap.reserve(tenant, hands)
        if wait is not None:
            await self._refuse(context, tenant, refusals.too_many_open_hands(self.cap.limit, wait))
        return hands

    async def _refuse(
        self, context: grpc.aio.ServicerContext[Any, Any], tenant: str, error: refusals.DealerError
    ) -> None:
        # The line carries the request id and tenant.
        log.info("refused: %s (retry in %.3f s)", error.reason, error.retry_delay)
        if self._on_refusal is not None:
            self._on_refusal(tenant, error.reason)
        await abort(context, error)


async def drain(
    inner: Callable[[Any, Any], Any], request: Any, context: grpc.aio.ServicerContext[Any, Any]
) -> None:
    """Run a server-streaming handler of either style: an async generator (its
    responses are written here) or a coroutine that writes them itself."""
    result = inner(request, context)
    if not hasattr(result, "__aiter__"):
        await result
        return
    try:
        async for response in result:
            try:
                await context.write(response)
            except Exception as e:
                if not _call_ended(e, context):
                    raise
                raise StreamGone from None
    finally:
        await result.aclose()


def _call_ended(error: Exception, context: grpc.aio.ServicerContext[Any, Any]) -> bool:
    """Whether a failed write means the call is over: grpc's own batch failure
    (private class, so matched by name), a passed deadline, or a cancellation. A
    failure of ours, such as a response that does not serialize, is not."""
    if type(error).__name__ == "ExecuteBatchError":
        return True
    remaining = context.time_remaining()
    return (remaining is not None and remaining <= 0) or context.cancelled()


class StreamGone(Exception):
    """A response could not be written because the call had already ended. Nobody is
    left to tell; the outermost interceptor records it (CANCELLED or DEADLINE_EXCEEDED)
    and returns, where gRPC would log an ERROR with a traceback for every such call."""
