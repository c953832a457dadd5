"""The SDK raises an exception of its own for every status code, chained from the RpcError.

Most codes (DATA_LOSS, ABORTED, OUT_OF_RANGE ...) are never sent by the dealer,
so to see each one arrive through the real gRPC transport and the real SDK, a
stand-in DealerService answers each call with the code named in its request.
CANCELLED also comes from a real dealer: a channel closed under a stream.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from fairdeck.client import AsyncDealerClient, DealerClient, exceptions
from fairdeck.client.exceptions import BY_CODE, FairdeckError
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.dealers import RunningDealer

FAILING_CODES = [code for code in grpc.StatusCode if code is not grpc.StatusCode.OK]
"""Every code a call can fail with (a server cannot end a call as failed with OK)."""


def test_every_status_code_has_a_class_of_its_own() -> None:
    assert set(BY_CODE) == set(grpc.StatusCode)
    classes = [BY_CODE[code] for code in FAILING_CODES]
    assert len(set(classes)) == len(classes)  # one per code: catching one catches no other
    assert all(issubclass(cls, FairdeckError) and cls is not FairdeckError for cls in classes)


def test_an_rpc_error_that_says_ok_is_unknown() -> None:
    error = grpc.aio.AioRpcError(grpc.StatusCode.OK, grpc.aio.Metadata(), grpc.aio.Metadata(), "odd")
    exc = exceptions.from_rpc_error(error)
    assert type(exc) is exceptions.Unknown
    assert exc.code is grpc.StatusCode.OK


class FailEveryCall:
    """A DealerService whose DrawCards and DealHands fail with the code named in hand_id / deck."""

    async def draw(self, request: pb.DrawCardsRequest, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode[request.hand_id], f"failed with {request.hand_id}")

    async def deal_hands(
        self, request: pb.DealHandsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.DealHandsResponse]:
        yield pb.DealHandsResponse(deck="standard", version="fairdeck-v1")  # one message, then the error
        await context.abort(grpc.StatusCode[request.deck], f"failed with {request.deck}")


@pytest.fixture(scope="module")
def failing_target() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    service = FailEveryCall()
    handlers = {
        "DrawCards": grpc.unary_unary_rpc_method_handler(
            service.draw, request_deserializer=pb.DrawCardsRequest.FromString
        ),
        "DealHands": grpc.unary_stream_rpc_method_handler(
            service.deal_hands,
            request_deserializer=pb.DealHandsRequest.FromString,
            response_serializer=pb.DealHandsResponse.SerializeToString,
        ),
    }

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("fairdeck.v1.DealerService", handlers),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def check(error: FairdeckError, code: grpc.StatusCode) -> None:
    assert type(error) is BY_CODE[code], code
    assert error.code is code
    assert isinstance(error.__cause__, grpc.RpcError)
    assert error.__cause__.code() is code  # type: ignore[attr-defined]


def test_every_failing_code_through_the_blocking_client(failing_target: str) -> None:
    with DealerClient(failing_target) as c:
        for code in FAILING_CODES:
            with pytest.raises(FairdeckError) as unary:
                c.draw(code.name, 1)
            check(unary.value, code)
            with pytest.raises(FairdeckError) as stream:
                list(c.deal_hands(code.name, 1))
            check(stream.value, code)


def test_every_failing_code_through_the_async_client(failing_target: str) -> None:
    async def run() -> None:
        async with AsyncDealerClient(failing_target) as c:
            for code in FAILING_CODES:
                with pytest.raises(FairdeckError) as unary:
                    await c.draw(code.name, 1)
                check(unary.value, code)
                with pytest.raises(FairdeckError) as stream:
                    [h async for h in c.deal_hands(code.name, 1)]
                check(stream.value, code)

    asyncio.run(run())


def test_a_stream_cut_by_closing_the_channel_raises_cancelled(tmp_path: Path) -> None:
    running = RunningDealer(tmp_path / "d", rate_limit=0, max_open_hands=0)
    target = running.start()
    try:
        c = DealerClient(target)
        hands = c.deal_hands("short", 5_000, close=True)
        next(hands)
        c.close()
        with pytest.raises(exceptions.Cancelled) as cut:
            list(hands)
        check(cut.value, grpc.StatusCode.CANCELLED)
    finally:
        running.close()
