"""The default deadline (edge/deadline.py) against a send already begun. A dealer stopped or starved
past a call's deadline wakes with its timer due while an inner layer's ``status.abort`` awaits its
send: the deadline must not abort a second time (gRPC's UsageError, logged with a traceback, seen
once in a SIGSTOPped worker); the client gets the first refusal, counted with it. A stream's first
response that waits on the client's flow-control window when the deadline cuts it: the client still
gets the deadline's status. A real grpc.aio server on loopback, the real layer, handlers of the
test's own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from fairdeck_server import refusals
from fairdeck_server.edge.deadline import DeadlineInterceptor
from fairdeck_server.edge.status import abort, status_of
from tests.support.error_details import error_info
from tests.support.waits import wait_for_async

DEADLINE = 0.2


def _past_the_deadline(loop: asyncio.AbstractEventLoop) -> None:
    """Hold the event loop, as SIGSTOP does, until the layer's deadline is due (its timer has not
    run: the loop is held)."""
    due = loop.time() + DEADLINE * 1.5
    while loop.time() < due:
        pass


async def _refused_late(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    _past_the_deadline(asyncio.get_running_loop())
    await abort(context, refusals.invalid_token())
    raise AssertionError("unreachable: abort raises")


async def _stream_refused_late(
    request: bytes, context: grpc.aio.ServicerContext[Any, Any]
) -> AsyncIterator[bytes]:
    await _refused_late(request, context)
    yield b""


def _counted(seen: list[grpc.StatusCode]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An outermost layer that records what the metrics layer records (status_of)."""

    def wrap(inner: Callable[..., Any]) -> Callable[..., Any]:
        async def behavior(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            try:
                return await inner(request, context)
            except BaseException as e:
                seen.append(status_of(e, context))
                raise

        return behavior

    return wrap


async def _call(kind: str) -> tuple[grpc.aio.AioRpcError, list[grpc.StatusCode]]:
    seen: list[grpc.StatusCode] = []
    counted = _counted(seen)
    deadline = DeadlineInterceptor(DEADLINE)

    class Outermost(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            handler = deadline.wrap(details.method, await continuation(details))
            if handler.unary_unary is not None:
                return grpc.unary_unary_rpc_method_handler(counted(handler.unary_unary))
            return grpc.unary_stream_rpc_method_handler(counted(handler.unary_stream))

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(_refused_late),
        "Stream": grpc.unary_stream_rpc_method_handler(_stream_refused_late),
    }
    server = grpc.aio.server(interceptors=[Outermost()])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fairdeck.test.Late", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                if kind == "Unary":
                    await channel.unary_unary(f"/fairdeck.test.Late/{kind}")(b"", timeout=30)
                else:
                    async for _ in channel.unary_stream(f"/fairdeck.test.Late/{kind}")(b"", timeout=30):
                        pass
    finally:
        await server.stop(None)
    return refused.value, seen


@pytest.mark.parametrize("kind", ["Unary", "Stream"])
def test_a_refusal_sent_as_the_deadline_passes_is_not_aborted_twice(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="grpc"):
        refused, seen = asyncio.run(_call(kind))
    # The client got the first refusal, whole; the layer did not end the call a second time.
    assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
    assert refused.details() == "invalid API token"
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
    # The call is counted as what the client received.
    assert seen == [grpc.StatusCode.UNAUTHENTICATED]


async def _refused_after_the_client_left(
    request: bytes, context: grpc.aio.ServicerContext[Any, Any]
) -> bytes:
    remaining = context.time_remaining()
    assert remaining is not None
    due = asyncio.get_running_loop().time() + remaining + 5 * DEADLINE
    while asyncio.get_running_loop().time() < due:  # held past the client's own deadline
        pass
    await abort(context, refusals.invalid_token())
    raise AssertionError("unreachable: abort raises")


async def _call_past_the_clients_deadline() -> tuple[grpc.aio.AioRpcError, list[grpc.StatusCode]]:
    seen: list[grpc.StatusCode] = []
    handler = grpc.unary_unary_rpc_method_handler(_counted(seen)(_refused_after_the_client_left))
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("fairdeck.test.Late", {"Gone": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await channel.unary_unary("/fairdeck.test.Late/Gone")(b"", timeout=DEADLINE)
    finally:
        await server.stop(None)
    return ended.value, seen


def test_a_refusal_that_could_not_be_sent_is_counted_as_the_call_s_end_not_as_the_refusal() -> None:
    """The client's deadline passed before the refusal went out: gRPC could not send it, so the
    client saw DEADLINE_EXCEEDED and the metrics say so too (it was counted UNAUTHENTICATED once
    status.abort marked every abort as sent)."""
    ended, seen = asyncio.run(_call_past_the_clients_deadline())
    assert ended.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert seen == [grpc.StatusCode.DEADLINE_EXCEEDED]


BIG = 70_000
"""A first response larger than the client's HTTP/2 flow-control window (64 KiB with gRPC's
bandwidth probing off, and nothing read): its write waits until the client reads."""
STATUS_WITHIN = 10.0
"""Seconds a client that reads again may wait for the status: generous, never a timing bar."""


async def _cut_while_the_first_response_waits() -> tuple[
    grpc.aio.AioRpcError, list[int], list[grpc.StatusCode], list[bool]
]:
    seen: list[grpc.StatusCode] = []
    written: list[bool] = []
    closed: list[bool] = []
    counted = _counted(seen)
    deadline = DeadlineInterceptor(DEADLINE)

    class Outermost(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            handler = deadline.wrap(details.method, await continuation(details))
            return grpc.unary_stream_rpc_method_handler(counted(handler.unary_stream))

    async def big(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        try:
            yield b"x" * BIG
            written.append(True)  # the write completed: the client read it before the deadline
            await asyncio.Event().wait()
        finally:
            closed.append(True)  # the deadline passed: the layer closed the handler

    handlers = {"Big": grpc.unary_stream_rpc_method_handler(big)}
    server = grpc.aio.server(interceptors=[Outermost()])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fairdeck.test.Window", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    received: list[int] = []
    try:
        options = [("grpc.http2.bdp_probe", 0)]  # the window stays 64 KiB
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            call = channel.unary_stream("/fairdeck.test.Window/Big")(b"", timeout=60)
            # The client reads nothing until the layer has cut the stream.
            await wait_for_async("the default deadline to cut the stream", lambda: closed)

            async def read() -> None:
                async for response in call:
                    received.append(len(response))

            with pytest.raises(grpc.aio.AioRpcError) as cut:
                # Before the fix: the response, then no status, ever (TimeoutError here).
                await asyncio.wait_for(read(), STATUS_WITHIN)
            await wait_for_async("the call to be counted", lambda: seen)
    finally:
        await server.stop(None)
    return cut.value, received, seen, written


def test_a_stream_cut_while_its_first_response_waits_on_the_window_still_ends_with_a_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first write hands gRPC core the response headers with the message, and grpc.aio notes
    them sent only when the write completes. Cut by the deadline while it waited on the client's
    window, the deadline's status carried the headers a second time; core refused that batch
    (ExecuteBatchError, read as a cancel) and the call had no status at all: its client, once it
    read, got the response and then waited for ever (a DealHands of big decks whose reader was slow
    to start, with no deadline of its own, as the SDK sets none)."""
    with caplog.at_level(logging.DEBUG, logger="grpc"):
        cut, received, seen, written = asyncio.run(_cut_while_the_first_response_waits())
    assert written == []  # the write was still waiting when the deadline passed
    assert received == [BIG]
    assert cut.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "wrote nothing" in (cut.details() or "")
    assert error_info(cut)[1].reason == "DEADLINE_EXCEEDED"
    assert seen == [grpc.StatusCode.DEADLINE_EXCEEDED]
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
