"""The one translation of errors into gRPC statuses.

A ``DealerError`` becomes its canonical status with a ``google.rpc.Status`` detail holding an
``ErrorInfo`` (stable ``reason``, ``field`` in its metadata) and, for a refusal to wait on, a
``RetryInfo``. Anything unexpected becomes INTERNAL with a fixed message and is logged here
without request data. Servicers and interceptors end calls only through ``abort`` and ``fail``;
``acyclic`` hands the AbortError to gRPC without the frames that would make the call a cycle.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from fairdeck.wire import ERROR_DOMAIN, STATUS_DETAILS_KEY, Reason
from fairdeck_server import refusals
from fairdeck_server.edge.methods import check_parsed

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def status_metadata(
    code: grpc.StatusCode, message: str, reason: Reason, field: str | None, retry_delay: float | None = None
) -> tuple[tuple[str, bytes]]:
    """The grpc-status-details-bin trailer for an error (google.rpc.Status + ErrorInfo,
    and a RetryInfo when the caller should wait ``retry_delay`` seconds and try again)."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN)
    if field:
        info.metadata["field"] = field
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    if retry_delay is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(max(1_000_000, int(retry_delay * 1e9)))  # at least 1 ms
        status.details.add().Pack(retry)
    return ((STATUS_DETAILS_KEY, status.SerializeToString()),)


_aborting: ContextVar[bool] = ContextVar("fairdeck_aborting", default=False)
"""Set in the call's own task once ``abort`` has begun sending its status (see abort_begun)."""


def abort_begun() -> bool:
    """Whether this call (its task) has begun sending a status through ``abort``. A call can be
    cancelled while that send is awaited (its deadline passed meanwhile: a stopped or starved
    process): gRPC core still sends the status already handed to it, and gRPC refuses a second
    abort with a UsageError that it logs with a traceback. A layer that would end the call on
    such a cancel (deadline.py) lets it end as cancelled instead."""
    return _aborting.get()


async def abort(context: grpc.aio.ServicerContext[Any, Any], error: refusals.DealerError) -> None:
    """End the call with ``error``'s status and details: the one way the servicers and
    the interceptors refuse a call."""
    code = grpc.StatusCode[error.status.name]
    message = str(error)
    _aborting.set(True)
    try:
        await context.abort(
            code,
            message,
            trailing_metadata=status_metadata(code, message, error.reason, error.field, error.retry_delay),
        )
    except grpc.aio.AbortError:
        raise
    except Exception as e:
        if type(e).__name__ != "ExecuteBatchError":  # grpc's private class, matched by name
            raise
        # The status could not be sent: the call ended meanwhile (the client cancelled, or a
        # deadline passed as we answered). Nobody is left to tell; ended as gRPC ends a
        # cancelled call, where the batch error would reach gRPC and be logged as an ERROR.
        # Nothing was sent: counted as cancelled, not as this refusal (status_of).
        _aborting.set(False)
        raise asyncio.CancelledError from None


async def fail(context: grpc.aio.ServicerContext[Any, Any], exc: Exception, where: str) -> None:
    """End the call for ``exc``: its own status if a DealerError, else INTERNAL."""
    if isinstance(exc, refusals.DealerError):
        await abort(context, exc)
    log.error("unexpected %s in %s", type(exc).__name__, where, exc_info=exc)
    await abort(context, refusals.internal())


def translated(
    method: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]]:
    @functools.wraps(method)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]) -> Resp:
        try:
            check_parsed(request)
            return await method(self, request, context)
        except Exception as e:
            await fail(context, e, method.__name__)
        raise AssertionError("unreachable: abort raises")

    return wrapper


async def translate(
    context: grpc.aio.ServicerContext[Any, Any], e: refusals.DealerError, method: str
) -> grpc.aio.AbortError:
    """A DealerError that escaped an interceptor (the open-hands cap reads storage before
    the handler runs; handlers translate their own), ended as the servicer ends its
    own (servicer.fail): its status and reason, not gRPC's UNKNOWN with a traceback.
    Other exceptions are bugs and go on to gRPC, which logs them."""
    try:
        await fail(context, e, method)
    except grpc.aio.AbortError as aborted:
        return aborted
    raise AssertionError("unreachable: fail aborts")


def acyclic(behavior: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
    """``behavior``, its AbortError passed on to gRPC with no traceback of the handlers' frames.

    gRPC keeps the AbortError on the call's state (it checks it is the one it raised), and the
    traceback's frames hold the context, which holds that state: a reference cycle of the whole
    call (its frames, request, task, about 75 objects) that only the garbage collector frees. A
    refusal held for seconds is old by then, so thousands of them wait for a full collection,
    which then stopped the event loop for up to 92 ms (2,500 concurrent GetHand; bench/README.md,
    section 13). Without the traceback (nor the exception it was raised in, whose traceback has
    the same frames), and with no local left naming it or the context, a refused call is freed
    as it ends. Other exceptions keep their traceback (gRPC logs them).
    """

    async def outermost(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await behavior(request, context)
        except grpc.aio.AbortError as e:
            # The exception it was raised while handling (a DealerError the servicer caught)
            # has a traceback of the same frames.
            e.__context__ = e.__cause__ = None
            aborted = [e]
        del request, context  # this frame is in the new traceback: nothing in it may lead back
        raise aborted.pop().with_traceback(None)

    return outermost


DEADLINE_SLACK_S = 0.05
"""A call cancelled this close to its deadline ended by the client's deadline: the client's
passes first (the server's counts from the call's arrival), and the client's cancel for it can
reach the dealer a moment before the dealer's own (2.6 ms before, in 1 of 97 such calls on two
busy cores), when it was counted CANCELLED though the client saw DEADLINE_EXCEEDED."""


def status_of(e: BaseException, context: grpc.aio.ServicerContext[Any, Any]) -> grpc.StatusCode:
    """The status the client receives when a handler ends by raising ``e``."""
    if isinstance(e, grpc.aio.AbortError):
        return context.code() or grpc.StatusCode.UNKNOWN
    if isinstance(e, asyncio.CancelledError) and abort_begun():  # cancelled while sending its status
        return context.code() or grpc.StatusCode.UNKNOWN
    if isinstance(e, asyncio.CancelledError):  # the client went away, or its deadline passed
        remaining = context.time_remaining()
        expired = remaining is not None and remaining <= DEADLINE_SLACK_S
        return grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN  # what gRPC answers for an exception it did not expect
