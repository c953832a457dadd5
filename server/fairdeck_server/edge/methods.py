"""How methods are served: lenient request parsing, registration, and the plumbing that
interceptors share (rewrapping a handler, draining a server stream, telling which service a
method belongs to).

A body that does not parse reaches its servicer as ``Malformed``, so every bad request gets the
same INVALID_ARGUMENT and ErrorInfo rather than gRPC's UNKNOWN. A response that cannot be written
because the call already ended raises ``StreamGone``, which the outermost layer records. A stream
sends its headers alone before its first response (``drain``), so that any status after it can be
sent whatever that response's write is waiting on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message

from fairdeck.wire import Reason
from fairdeck_server import refusals


class Malformed:
    """Stands in for a request body that does not parse as its message type (``size``: its bytes)."""

    __slots__ = ("size", "type_name")

    def __init__(self, type_name: str, size: int = 0) -> None:
        self.type_name = type_name
        self.size = size


_received: ContextVar[int] = ContextVar("fairdeck_request_bytes", default=0)
"""The bytes of the request body this call received (set by its deserializer, in the call's own
task, before any interceptor's behavior runs): what ``call_cost`` counts, since the message they
parse to can be far smaller (a field sent again and again: the last one wins)."""

wrote: ContextVar[Callable[[], None] | None] = ContextVar("fairdeck_stream_wrote", default=None)
"""Told after each response ``drain`` wrote, in the call's own task: the default deadline of a
stream counts from its last write (deadline.py)."""


def _lenient(message_class: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        _received.set(len(data))
        try:
            return message_class.FromString(data)
        except DecodeError:
            return Malformed(message_class.DESCRIPTOR.full_name, len(data))

    return parse


FREE_BYTES = 64 * 1024
"""A request's first 64 KiB count as its one call: every request a client needs fits (64 client
seeds typed decomposed, valid by their NFC bytes, make a DealNewHand of about 49 KiB)."""
BYTES_PER_CALL = 16 * 1024
"""Past FREE_BYTES, a request counts one call more against its tenant's rate per started 16 KiB:
what a call costs the dealer before any handler (receiving, parsing) grows with its body. One of
512 KiB counts 29."""


def call_cost(request: object) -> int:
    """What ``request`` counts against its tenant's rate (FREE_BYTES, BYTES_PER_CALL): the bytes
    its deserializer received (the message's own size only if none did)."""
    if isinstance(request, Malformed):
        return _cost(request.size)
    return _cost(_received.get() or request.ByteSize())  # type: ignore[attr-defined]


def _cost(size: int) -> int:
    return 1 + max(0, -(-(size - FREE_BYTES) // BYTES_PER_CALL))


def check_parsed(request: object) -> None:
    """Refuse a body that did not parse, with INVALID_ARGUMENT instead of gRPC's UNKNOWN."""
    if isinstance(request, Malformed):
        raise refusals.invalid(
            "request", Reason.MALFORMED_REQUEST, f"the body is not a valid {request.type_name}"
        )


def register(
    server: grpc.aio.Server, servicer: object, service: ServiceDescriptor, messages: ModuleType
) -> None:
    """Add a servicer's methods like the generated add_*_to_server, but with
    request parsing that cannot fail: bad bytes reach the servicer as
    Malformed, so every bad request gets the same status and ErrorInfo."""
    handlers = {}
    for method in service.methods:
        kwargs: dict[str, Any] = {
            "request_deserializer": _lenient(getattr(messages, method.input_type.name)),
            "response_serializer": _serialize,
        }
        fn = getattr(servicer, method.name)
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(fn, **kwargs)
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(fn, **kwargs)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)  # type: ignore[attr-defined]


UNKNOWN_METHOD = "/unknown/unknown"
"""How the metrics name a method the dealer does not serve: one label, whatever the caller asked
for (a caller-chosen label per call would grow the metrics without bound)."""


def unknown_method_handler(
    count_failure: Callable[[str], Awaitable[None]],
) -> grpc.RpcMethodHandler[Any, Any]:
    """The handler of every method the dealer does not serve: UNIMPLEMENTED ``UNKNOWN_METHOD``,
    no traceback. ``count_failure(peer)`` counts it as a failed call of the client's address
    (it raises the held AUTH_RATE_LIMITED refusal once the address has none left), so calling
    methods that do not exist is limited like failing to authenticate. Stream-stream with no
    deserializer: it serves every call shape, and reads no request bytes."""

    async def behavior(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await count_failure(context.peer())
        raise refusals.unknown_method()

    return grpc.stream_stream_rpc_method_handler(behavior)


def loggable_method(method: str) -> str:
    """A method name the caller chose, fit for a log line: printable ASCII, at most 96 characters."""
    text = method.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
    return text if len(text) <= 96 else text[:93] + "..."


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def rewrap(
    handler: grpc.RpcMethodHandler[Any, Any],
    unary: Callable[[Callable[..., Any]], Callable[..., Any]],
    stream: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` with its behavior wrapped by ``unary`` or ``stream`` (by response
    kind), for interceptors: the same deserializer and serializer, a new behavior."""
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **kwargs)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), **kwargs)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(stream(handler.unary_stream), **kwargs)
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(stream(handler.stream_stream), **kwargs)
    return handler


UNLIMITED_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)
"""Never rate limited nor cut by the default deadline (Watch and reflection streams are long by design)."""


def service_of(method: str) -> str:
    """``/pkg.Service/Method`` -> ``pkg.Service``."""
    return method.lstrip("/").split("/", 1)[0]


async def drain(
    inner: Callable[[Any, Any], Any], request: Any, context: grpc.aio.ServicerContext[Any, Any]
) -> None:
    """Run a server-streaming handler of either style: an async generator (its
    responses are written here) or a coroutine that writes them itself."""
    result = inner(request, context)
    if not hasattr(result, "__aiter__"):
        await result
        return
    headers_sent = False
    try:
        async for response in result:
            try:
                if not headers_sent:
                    await _send_headers(context)
                    headers_sent = True
                await context.write(response)
            except Exception as e:
                if not _call_ended(e, context):
                    raise
                raise StreamGone from None
            if (progressed := wrote.get()) is not None:
                progressed()
    finally:
        await result.aclose()


async def _send_headers(context: grpc.aio.ServicerContext[Any, Any]) -> None:
    """The response headers (initial metadata), sent alone before a stream's first response.

    A write hands gRPC core the headers with its message, and grpc.aio notes them sent only once
    the write completes. A first response larger than the client's flow-control window (a client
    that does not read) waits; cut by the default deadline, it leaves core holding headers that
    grpc.aio thinks unsent: the deadline's status carries them a second time, core refuses that
    batch, and the call ends with no status at all, its client waiting for ever. Headers alone
    wait on no window. A cancel while they are on their way waits for them, for the same reason:
    the call's end then finds them sent."""
    sending = asyncio.ensure_future(context.send_initial_metadata(()))
    try:
        await asyncio.shield(sending)
    except asyncio.CancelledError:
        sending.add_done_callback(_retrieved)  # its failure, if any: how the call ended says it
        await asyncio.wait((sending,))
        raise


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


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
