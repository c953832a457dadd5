"""The layers every call passes, outermost first (wired in app.py, fused by chain.py).

- ``ObservingInterceptor``: binds the call's request id, then counts, times and logs every call
  with the status the client receives (metrics.py, logging_setup.py).
- ``DeadlineInterceptor`` (deadline.py): the default deadline; a stream's counts from its last write.
- ``AuthInterceptor``: finds the caller (auth.py), checks its role and binds its principal.
- ``LimitsInterceptor``: the tenant's rate, open-hands cap, calls in flight and streams
  (limits.py), and fair admission (fair.py).

Each only adapts gRPC to a policy that imports no grpc; refusals end through status.abort.
Health and reflection pass without credentials, limits or the default deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from fairdeck_server import fair, principal, refusals
from fairdeck_server.dealing.bulk import hands_held
from fairdeck_server.edge.chain import LayerInterceptor, ServerInterceptor
from fairdeck_server.edge.methods import (
    UNLIMITED_SERVICES,
    Malformed,
    StreamGone,
    call_cost,
    drain,
    rewrap,
    service_of,
)
from fairdeck_server.edge.peers import peer_address
from fairdeck_server.edge.status import abort, acyclic, status_of, translate
from fairdeck_server.observe import logging_setup
from fairdeck_server.observe.metrics import Metrics
from fairdeck_server.policy.auth import Authenticator, check_role, is_open
from fairdeck_server.policy.group_counts import CALLS, STREAMS, GroupCounts
from fairdeck_server.policy.limits import MAX_TENANTS, OpenHandsCap, RateLimiter
from fairdeck_server.principal import Principal
from fairdeck_server.refusals import DealerError

log = logging.getLogger(__name__)


class ObservingInterceptor(ServerInterceptor):
    """Outermost: binds the call's request id, then counts, times and logs
    every call, whatever ends it (auth and limit refusals, aborts, errors,
    cancellation), with the status code the client receives."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None:
            return handler  # an unknown method: gRPC answers UNIMPLEMENTED
        method: str = details.method
        metadata = tuple(details.invocation_metadata or ())
        return rewrap(
            handler,
            functools.partial(self._unary, method, metadata),
            functools.partial(self._stream, method, metadata),
        )

    def wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any], *, label: str | None = None
    ) -> grpc.RpcMethodHandler[Any, Any]:
        """This layer around ``handler``, made once for every call of ``method`` (chain.py).
        ``label``: the name the metrics give the method, if not ``method`` (an unknown one)."""
        return rewrap(
            handler,
            functools.partial(self._unary, method, None, label=label),
            functools.partial(self._stream, method, None, label=label),
        )

    def _unary(
        self,
        method: str,
        metadata: tuple[Any, ...] | None,
        inner: Callable[[Any, Any], Any],
        *,
        label: str | None = None,
    ) -> Callable[..., Any]:
        """``metadata`` None: the call's own, read when it runs (a behavior made once per method)."""

        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            call, token = logging_setup.begin_call(
                method, metadata if metadata is not None else context.invocation_metadata()
            )
            self.metrics.started_rpc(label or call.method)
            start = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                response = await inner(request, context)
                code = context.code() or grpc.StatusCode.OK
                return response
            except refusals.DealerError as e:
                aborted = await translate(context, e, method)
                code = status_of(aborted, context)
                raise aborted from None
            except NotImplementedError:  # a generated base class's method that nobody overrides
                aborted = await translate(context, refusals.unknown_method(), method)
                code = status_of(aborted, context)
                raise aborted from None
            except BaseException as e:
                code = status_of(e, context)
                raise
            finally:
                self._finish(call, code, time.perf_counter() - start, label)
                logging_setup.end_call(token)

        return acyclic(behavior)

    def _stream(
        self,
        method: str,
        metadata: tuple[Any, ...] | None,
        inner: Callable[[Any, Any], Any],
        *,
        label: str | None = None,
    ) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            call, token = logging_setup.begin_call(
                method, metadata if metadata is not None else context.invocation_metadata()
            )
            self.metrics.started_rpc(label or call.method)
            start = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                await drain(inner, request, context)
                code = context.code() or grpc.StatusCode.OK
            except StreamGone:
                code = status_of(asyncio.CancelledError(), context)
                # Ended as gRPC ends a cancelled call: returning would make gRPC send a final
                # status on the ended call, which can fail in turn and be logged as an ERROR
                # (the fuzzer and a CI run saw it) while "client closed" is not yet set.
                raise asyncio.CancelledError from None
            except refusals.DealerError as e:
                aborted = await translate(context, e, method)
                code = status_of(aborted, context)
                raise aborted from None
            except NotImplementedError:  # a generated base class's method that nobody overrides
                aborted = await translate(context, refusals.unknown_method(), method)
                code = status_of(aborted, context)
                raise aborted from None
            except BaseException as e:
                code = status_of(e, context)
                raise
            finally:
                self._finish(call, code, time.perf_counter() - start, label)
                logging_setup.end_call(token)

        return acyclic(behavior)

    def _finish(
        self, call: logging_setup.CallContext, code: grpc.StatusCode, seconds: float, label: str | None
    ) -> None:
        self.metrics.observe_rpc(label or call.method, code.name, seconds)
        logging_setup.log_access(call, code.name, seconds)


DEALER = "/fairdeck.v1.DealerService/"
OPENING_METHODS = frozenset({DEALER + "OpenHand", DEALER + "DealNewHand", DEALER + "DealHands"})


def hands_requested(method: str, request: object) -> int:
    """How many hands a call holds against the open-hands cap while it runs (the dealer's
    rule, ``bulk.hands_held``, applied to the request); a request the servicer will refuse as
    malformed counts as nothing."""
    if method not in OPENING_METHODS or isinstance(request, Malformed):
        return 0
    if method == DEALER + "DealHands":
        return hands_held(
            int(getattr(request, "hand_count", 0)), close=bool(getattr(request, "close", False))
        )
    return hands_held()


Refusal = Callable[[str, str], None]
"""Told (tenant, reason) of every refused call: the metrics count them."""


def _no_way(tenant: str) -> None:
    return None


class LimitsInterceptor(LayerInterceptor):
    """Refuses calls over a tenant's rate, open-hands cap, calls in flight or streams, paces a
    tenant's burst while tenants share (RateLimiter.pace), and admits the others in fair turns
    (fair.Admission). Runs inside the auth interceptor, so
    ``principal.current()`` is the caller. Its streams stay async generators, as the auth
    interceptor expects.

    A refusal of a flood (rate, calls in flight, streams, the open-hands cap asked again within
    CAP_AGAIN) is answered after a while: the retry delay, at most HOLD_SECONDS, and the
    RetryInfo then asks for only the rest. A client that floods and waits for its answers floods
    more slowly, and a refused call costs no CPU while it waits. A tenant with many refusals held
    at once gets them answered at HELD_ANSWERS_PER_S (each is held its share of that queue),
    whatever it keeps in flight; no hold passes half the call's deadline (the client's, or the
    default deadline when shorter: past it the call would end DEADLINE_EXCEEDED instead)."""

    def __init__(
        self,
        rate: RateLimiter,
        cap: OpenHandsCap,
        *,
        admission: fair.Admission | None = None,
        streams: StreamCap | None = None,
        on_refusal: Refusal | None = None,
        on_tenant: Callable[[str], None] | None = None,
        default_deadline: float = 0.0,
        group: GroupCounts | None = None,
        give_way: Callable[[str], None] | None = None,
    ) -> None:
        self.rate = rate
        self.cap = cap
        self.give_way = give_way or _no_way
        """Called with the tenant as each of its calls starts: a storage thread with another
        tenant's work under way goes on first (storage.sqlite.handoff.give_way, given by run.app)."""
        self.group = group
        """Counts shared by the processes of ``serve --processes N``: calls in flight count
        across them (group_counts.py); None in a dealer of one process."""
        self.admission = admission if admission is not None else fair.Admission(0, 0)
        self.streams = streams if streams is not None else StreamCap(0)
        self._on_refusal = on_refusal
        self._on_tenant = on_tenant
        self.default_deadline = default_deadline
        """The DeadlineInterceptor's (0: none): a hold never passes half of it either, or the
        call would end DEADLINE_EXCEEDED instead of its refusal."""
        self._held = 0
        """Refusals being held now (at most MAX_HELD; past it they are answered at once)."""
        self._held_by: dict[str, int] = {}
        """Refusals being held now, per tenant."""
        self._capped: dict[str, float] = {}
        """When each tenant was last refused TOO_MANY_OPEN_HANDS (monotonic seconds)."""

    @property
    def inert(self) -> bool:
        """Every limit off and nobody to tell the tenant: the layer would change nothing."""
        return (
            not self.rate.enabled
            and not self.cap.enabled
            and not self.admission.enabled
            and not self.streams.enabled
            and self._on_tenant is None
        )

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """This layer around ``handler`` for calls of ``method``; ``handler`` itself when it
        has nothing to do (health and reflection, or every limit off)."""
        if service_of(method) in UNLIMITED_SERVICES or self.inert:
            return handler
        return rewrap(
            handler, functools.partial(self._unary, method), functools.partial(self._stream, method)
        )

    def _unary(self, method: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            tenant = principal.current().tenant
            self.give_way(tenant)  # another tenant's storage work under way goes on first
            hands = await self._admit(method, tenant, request, context)
            refused = False
            limit = self.admission.per_tenant
            group = self.group if limit > 0 else None  # calls in flight counted across processes
            grouped = False
            try:
                if group is not None:
                    if not group.take(tenant, CALLS, 1, limit):
                        await self._refuse(context, tenant, refusals.too_many_calls(limit, CALLS_RETRY))
                    grouped = True
                if not await self.admission.enter(tenant):
                    await self._refuse(context, tenant, refusals.too_many_calls(limit, CALLS_RETRY))
                try:
                    return await inner(request, context)
                finally:
                    self.admission.leave(tenant)
            except grpc.aio.AbortError:
                refused = context.code() in WROTE_NOTHING
                raise
            finally:
                if group is not None and grouped:
                    group.give(tenant, 1, CALLS)
                # A refused call opened nothing: its slots are free at once. A call cancelled or
                # past its deadline may still be written, so its slots wait for the next count.
                self.cap.release(tenant, hands, opened=not refused)

        return behavior

    def _stream(self, method: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            tenant = principal.current().tenant
            self.give_way(tenant)
            hands = await self._admit(method, tenant, request, context)
            try:
                # A body that does not parse makes no stream: its servicer refuses it as malformed.
                counted = not isinstance(request, Malformed)
                if counted and not self.streams.enter(tenant):
                    await self._refuse(
                        context, tenant, refusals.too_many_streams(self.streams.limit, STREAMS_RETRY)
                    )
                try:
                    result = inner(request, context)
                    if not hasattr(result, "__aiter__"):
                        await result  # a coroutine that writes its responses itself
                        return
                    try:
                        async for response in result:
                            self.admission.saw(tenant)  # calling all along: the others pace
                            yield response
                    finally:
                        await result.aclose()
                finally:
                    if counted:
                        self.streams.leave(tenant)
            finally:
                self.cap.release(tenant, hands)

        return behavior

    async def _admit(
        self, method: str, tenant: str, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> int:
        """The hands reserved for the call, or abort with RESOURCE_EXHAUSTED."""
        if self._on_tenant is not None:
            self._on_tenant(tenant)
        cost = call_cost(request)
        wait = self.rate.acquire(tenant, cost)
        if wait is not None:
            await self._refuse(context, tenant, refusals.rate_limited(wait))
        if self.rate.enabled and self.admission.others(tenant):  # a burst, at its rate while shared
            most = self._deadline(context) / 2
            pace = self.rate.pace(tenant, cost, most)
            if pace > most:  # it would wait past half its deadline: refused instead
                await self._refuse(context, tenant, refusals.paced_past_deadline(pace))
            elif pace > 0:
                await self.rate.paced(tenant, cost, pace)
        hands = hands_requested(method, request)
        wait = await self.cap.reserve(tenant, hands)
        if wait is not None:
            refused = refusals.too_many_open_hands(self.cap.limit, wait)
            # The first refusal is answered at once (close some first); asking again while still
            # capped is a flood, held like the others.
            await self._refuse(context, tenant, refused, held=self._capped_again(tenant))
        return hands

    def _capped_again(self, tenant: str) -> bool:
        """Whether ``tenant`` was refused TOO_MANY_OPEN_HANDS within the last CAP_AGAIN seconds."""
        now = time.monotonic()
        last = self._capped.get(tenant)
        again = last is not None and now - last < CAP_AGAIN
        # When this refusal is answered: a held one a hold later, so the next ask counts from then.
        self._capped[tenant] = now + (HOLD_SECONDS if again else 0.0)
        if len(self._capped) > MAX_TENANTS:  # forget those that no longer matter
            self._capped = {t: at for t, at in self._capped.items() if now - at < CAP_AGAIN}
        return again

    def _deadline(self, context: grpc.aio.ServicerContext[Any, Any]) -> float:
        """Seconds left of the call's deadline: the client's, or the dealer's default when that
        is shorter (it runs outside this layer and would cut a longer wait with
        DEADLINE_EXCEEDED); 2 * NO_DEADLINE_HOLD when there is none."""
        remaining = context.time_remaining()
        if self.default_deadline > 0:
            remaining = self.default_deadline if remaining is None else min(remaining, self.default_deadline)
        return NO_DEADLINE_HOLD * 2 if remaining is None else remaining

    async def _refuse(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        tenant: str,
        error: refusals.DealerError,
        *,
        held: bool = True,
    ) -> None:
        # The line carries the request id and tenant.
        log.info("refused: %s (retry in %.3f s)", error.reason, error.retry_delay)
        if self._on_refusal is not None:
            self._on_refusal(tenant, error.reason)
        hold = 0.0
        if held:
            # Its share of the tenant's queue of held refusals: a client keeping thousands in
            # flight is answered HELD_ANSWERS_PER_S a second, not as fast as the loop can refuse.
            queued = self._held_by.get(tenant, 0) / HELD_ANSWERS_PER_S
            limit = self._deadline(context) / 2
            hold = max(min(error.retry_delay or 0.0, HOLD_SECONDS), queued)
            if hold > limit:
                # Past the deadline's bound every such refusal would be answered at the same
                # moment, and the client would send them all again at once: spread them.
                hold = limit * random.uniform(0.5, 1.0)
        if hold > 0 and self._held < MAX_HELD:
            self._held += 1
            self._held_by[tenant] = self._held_by.get(tenant, 0) + 1
            try:
                await asyncio.sleep(hold)
            finally:
                self._held -= 1
                left = self._held_by.pop(tenant) - 1
                if left:
                    self._held_by[tenant] = left
            error.retry_delay = max(0.0, (error.retry_delay or 0.0) - hold)
        await abort(context, error)


CALLS_RETRY = 0.1
"""Seconds a call refused TOO_MANY_CALLS is asked to wait: the tenant's calls finish in milliseconds."""
STREAMS_RETRY = 1.0
"""Seconds a stream refused TOO_MANY_STREAMS is asked to wait: a stream runs for seconds."""
WROTE_NOTHING = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)
"""The codes of refusals, which write nothing (storage refuses before it writes)."""
CAP_AGAIN = 1.0
"""A tenant refused TOO_MANY_OPEN_HANDS again within this many seconds has its refusal held."""
HOLD_SECONDS = 1.0
"""The longest a refusal is held for its retry delay (its share of its tenant's held refusals,
HELD_ANSWERS_PER_S, may hold it longer, up to half the call's deadline)."""
NO_DEADLINE_HOLD = 30.0
"""The longest a refusal is held when the call has no deadline at all (client or default)."""
HELD_ANSWERS_PER_S = 100.0
"""How fast one tenant's held refusals are answered once it has many: the n-th held at once
waits n / this (so 2,500 in flight cost the event loop 100 refusals a second, not 1,400)."""
MAX_HELD = 10_000
"""Refusals held at once, at most; past it they are answered at once (memory over throttling)."""


class StreamCap:
    """At most ``limit`` server streams (DealHands) per tenant at once (0: no limit); with
    ``group``, counted across the processes of ``serve --processes N`` (group_counts.py)."""

    def __init__(self, limit: int, group: GroupCounts | None = None) -> None:
        self.limit = limit
        self.group = group
        self._open: dict[str, int] = {}

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def enter(self, tenant: str) -> bool:
        held = self._open.get(tenant, 0)
        if self.limit > 0 and held >= self.limit:
            return False
        if self.group is not None and self.limit > 0 and not self.group.take(tenant, STREAMS, 1, self.limit):
            return False
        self._open[tenant] = held + 1
        return True

    def leave(self, tenant: str) -> None:
        if self.group is not None and self.limit > 0:
            self.group.give(tenant, 1, STREAMS)
        left = self._open.get(tenant, 0) - 1
        if left > 0:
            self._open[tenant] = left
        else:
            self._open.pop(tenant, None)


class AuthInterceptor(LayerInterceptor):
    """Authenticates each call, checks its role, and binds its principal while it runs."""

    def __init__(
        self, authenticator: Authenticator, *, on_tenant: Callable[[str], None] | None = None
    ) -> None:
        self.authenticator = authenticator
        self._on_tenant = on_tenant
        """Told the tenant of each admitted call (the access log's tenant)."""

    def wrap(self, method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        """This layer around ``handler`` for calls of ``method``; ``handler`` itself for the
        methods open to all (health, reflection)."""
        if is_open(method):
            return handler
        admit = functools.partial(self._admit, method)
        return rewrap(handler, lambda inner: _unary(inner, admit), lambda inner: _streaming(inner, admit))

    async def _admit(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> Principal:
        """The call's principal, or the call ends here with the refusal's status. A token lookup
        before the tenant is known is the client address's work (fair.py)."""
        address = peer_address(context.peer())
        bound = fair.bind("@" + address)
        try:
            caller = await self.authenticator.principal(
                tuple(context.invocation_metadata() or ()), context.auth_context(), address
            )
            check_role(method, caller)
        except DealerError as e:
            log.info("refused %s: %s", method, e.reason)
            await abort(context, e)
            raise AssertionError("unreachable: abort raises") from None
        finally:
            fair.unbind(bound)
        if self._on_tenant is not None:
            self._on_tenant(caller.tenant)
        return caller


Admit = Callable[[grpc.aio.ServicerContext[Any, Any]], Awaitable[Principal]]


def _unary(behavior: Callable[..., Any], admit: Admit) -> Callable[..., Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        caller = await admit(context)
        token, whose = principal.bind(caller), fair.bind(caller.tenant)  # its work, in every queue
        try:
            return await behavior(request, context)
        finally:
            fair.unbind(whose)
            principal.unbind(token)

    return call


def _streaming(behavior: Callable[..., Any], admit: Admit) -> Callable[..., AsyncIterator[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        caller = await admit(context)
        token, whose = principal.bind(caller), fair.bind(caller.tenant)
        try:
            async for response in behavior(request, context):
                yield response
        finally:
            # A generator finalized by the event loop runs in another context; the binding
            # died with the call's own context then.
            with contextlib.suppress(ValueError):
                fair.unbind(whose)
                principal.unbind(token)

    return call
