"""The dealer's default deadline, for a call whose client set none (or a longer one).

A unary call may run ``default_deadline`` seconds in all. A server stream may go that long
without a response written: each write that completes starts its time again, so a bulk
``DealHands`` that keeps moving is never cut for sharing the dealer with others, while one
whose reader stopped (its writes wait on flow control) or whose next response never comes is.
A stream still has STREAM_RUNS default deadlines in all, and its connection's age grace is
longer (app.py), so that a stream in flight when its connection reaches max_connection_age ends by
this layer, with a reason, before gRPC closes the connection under it (UNAVAILABLE, none).
Health and reflection pass untouched. What a cut call made durable stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from fairdeck_server import refusals
from fairdeck_server.edge.chain import LayerInterceptor
from fairdeck_server.edge.methods import UNLIMITED_SERVICES, drain, rewrap, service_of, wrote
from fairdeck_server.edge.status import abort, abort_begun

STREAM_RUNS = 10
"""A stream may run this many default deadlines in all, however it keeps writing (300 s at the
default 30 s: the largest DealHands takes about 16 s alone, 20-30 s beside other bulk readers).
The connection age's grace is one default deadline more (app.py): a stream that began before
its connection's GOAWAY ends here, with its reason, before gRPC closes the connection."""


class DeadlineInterceptor(LayerInterceptor):
    """Ends a unary call that runs longer than ``default_deadline`` seconds, and a stream that
    writes nothing for as long, with DEADLINE_EXCEEDED (reason ``DEADLINE_EXCEEDED``); a
    client's shorter deadline ends either first anyway. Runs outside the auth interceptor so
    that it sees every write of a stream (``methods.wrote``)."""

    def __init__(self, default_deadline: float) -> None:
        self.default_deadline = default_deadline

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
                _unless_aborting()
                await abort(context, refusals.deadline_exceeded(self.default_deadline))

        return behavior

    def _stream(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        seconds = self.default_deadline

        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            deadline = asyncio.timeout(seconds)
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds * STREAM_RUNS

            def progressed() -> None:
                if not deadline.expired():
                    deadline.reschedule(min(loop.time() + seconds, end))

            token = wrote.set(progressed)
            try:
                async with deadline:
                    await drain(inner, request, context)
            except TimeoutError:
                if not deadline.expired():
                    raise
                _unless_aborting()
                when = deadline.when()
                if when is not None and when >= end:
                    await abort(context, refusals.stream_ran_too_long(seconds * STREAM_RUNS))
                await abort(context, refusals.stream_stalled(seconds))
            finally:
                wrote.reset(token)

        return behavior


def _unless_aborting() -> None:
    """The deadline passed while the call was sending its own refusal (status.abort_begun): that
    status stands (gRPC core sends what it was handed), and a second abort would be gRPC's
    UsageError, logged with a traceback. The call ends as cancelled."""
    if abort_begun():
        raise asyncio.CancelledError from None
