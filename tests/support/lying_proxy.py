"""A gRPC proxy for the lying-server tests (test_lying_server.py): a grpc.aio server with a
generic handler of raw bytes that forwards each AuditService call to a real dealer and hands
the parsed request, the response and a way to forward (another) request to ``lie``, which
decides what is answered. Out of the box it tells the truth (``honest``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from fairdeck.v1 import audit_pb2 as pb

SERVICE = "fairdeck.v1.AuditService"
MESSAGES: dict[str, tuple[type[Message], type[Message]]] = {
    "GetCheckpoint": (pb.GetCheckpointRequest, pb.GetCheckpointResponse),
    "ListEntries": (pb.ListEntriesRequest, pb.ListEntriesResponse),
    "GetInclusionProof": (pb.GetInclusionProofRequest, pb.GetInclusionProofResponse),
    "GetConsistencyProof": (pb.GetConsistencyProofRequest, pb.GetConsistencyProofResponse),
    "GetPublicKey": (pb.GetPublicKeyRequest, pb.GetPublicKeyResponse),
}
Forward = Callable[[Message], Awaitable[Any]]
LieFn = Callable[[str, Any, Forward], Awaitable[Any]]


async def honest(method: str, request: Any, forward: Forward) -> Any:
    return await forward(request)


class LyingProxy:
    """Forwards AuditService calls to ``upstream``; ``lie`` decides what is answered."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.lie: LieFn = honest
        self.calls: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.target = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)

    async def _start(self) -> str:
        self.channel = grpc.aio.insecure_channel(self.upstream)
        self.server = grpc.aio.server()
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(self._handler(name))  # raw bytes in and out
            for name in MESSAGES
        }
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{port}"

    def _handler(
        self, method: str
    ) -> Callable[[bytes, grpc.aio.ServicerContext[Any, Any]], Awaitable[bytes]]:
        request_type, response_type = MESSAGES[method]
        upstream = self.channel.unary_unary(  # no serializers: raw bytes both ways
            f"/{SERVICE}/{method}", request_serializer=None, response_deserializer=None
        )

        async def forward(request: Message) -> Any:
            raw = await upstream(request.SerializeToString(), timeout=10)
            return response_type.FromString(raw)

        async def handle(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            self.calls.append(method)
            try:
                response = await self.lie(method, request_type.FromString(raw), forward)
            except grpc.aio.AioRpcError as e:
                await context.abort(e.code(), e.details() or "")
            answer: bytes = response.SerializeToString()
            return answer

        return handle

    def close(self) -> None:
        async def stop() -> None:
            await self.server.stop(None)
            await self.channel.close(None)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
