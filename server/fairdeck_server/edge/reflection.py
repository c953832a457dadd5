"""gRPC server reflection under both names clients use: grpc.reflection.v1 and v1alpha.

grpcio-reflection ships only v1alpha, while newer tools (grpcurl, Postman, grpc CLI) ask for
grpc.reflection.v1 first. The two are the same messages under another package, so v1 is served
by the same servicer with the v1alpha classes, its file descriptor (the v1alpha one, renamed)
added to the default pool.

Also served, as every tool expects: a method's full name resolves to its service's file, and the
files of a refusal's details (google.rpc.Status, ErrorInfo, RetryInfo), so grpcurl decodes them.
Reflection takes no credentials and no tenant's limit, so its work is charged to the client
address and its connection (open_work.py): its answers are paced, RATE a second after a burst of
BURST for all callers together, handed out in fair turns of addresses (a flood waits behind
itself), and its streams count against the address's open streams with health Watch's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.rpc import error_details_pb2, status_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from fairdeck_server import refusals
from fairdeck_server.edge.peers import peer_address
from fairdeck_server.edge.status import abort
from fairdeck_server.policy.open_work import OpenStreams, SharedPace

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE_NAME: str = reflection.SERVICE_NAME
_V1_FILE = "grpc/reflection/v1/reflection.proto"
_V1ALPHA_PACKAGE = "grpc.reflection.v1alpha"
RATE = 50.0
BURST = 200
"""Reflection answers a second, and at once: a flood costs the dealer's loop little, and a tool's
whole session (`grpcurl describe` of everything: tens of requests) fits in the burst."""
STREAMS_RETRY = 1.0
"""Seconds a reflection stream refused TOO_MANY_STREAMS is asked to wait."""
FIRST_REQUEST_WAIT = 5.0
"""Seconds a refused stream's first request is waited for before the refusal is sent (a flooding
client under load took over 1 s to send it)."""
ERROR_DETAIL_FILES = (status_pb2.DESCRIPTOR.name, error_details_pb2.DESCRIPTOR.name)
"""In the default pool by this module's own import: a refusal's details resolve through them."""


class _Pool:
    """The default pool, resolving a method's full name to its service's file too (the pool's
    FindFileContainingSymbol knows messages, enums, services and fields, not methods)."""

    def __init__(self, pool: descriptor_pool.DescriptorPool) -> None:
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def FindFileContainingSymbol(self, symbol: str) -> Any:
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            service, _, method = symbol.rpartition(".")
            if not service or method not in self._pool.FindServiceByName(service).methods_by_name:
                raise
            return self._pool.FindServiceByName(service).file


class _Paced(reflection.aio.ReflectionServicer):  # type: ignore[name-defined,misc]
    """The reflection servicer, reading each request only in its address's turn of the shared pace."""

    def __init__(self, names: Sequence[str], pool: Any, streams: OpenStreams) -> None:
        super().__init__(names, pool=pool)
        self.pace = SharedPace(RATE, BURST)
        self.streams = streams

    async def ServerReflectionInfo(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        connection = context.peer()
        address = peer_address(connection)
        if not self.streams.enter(address, connection):
            # Its first request read first: refused while the client still sends it, the
            # client's write failed and gRPC Python reported INTERNAL, not the refusal.
            with contextlib.suppress(TimeoutError, StopAsyncIteration):
                async with asyncio.timeout(FIRST_REQUEST_WAIT):
                    await anext(aiter(requests))
            await abort(context, refusals.too_many_open_streams(self.streams.limit, STREAMS_RETRY))
        try:

            async def paced() -> AsyncIterator[Any]:
                async for request in requests:
                    await self.pace.turn(address, connection)
                    yield request

            async for response in super().ServerReflectionInfo(paced(), context):
                yield response
        finally:
            self.streams.leave(address, connection)


def _add_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
        return  # already there (a library that ships v1 was imported)
    except KeyError:
        pass
    source = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(source)
    v1 = descriptor_pb2.FileDescriptorProto()
    v1.CopyFrom(source)
    v1.name = _V1_FILE
    v1.package = "grpc.reflection.v1"
    v1.ClearField("options")  # the v1alpha file's java/go options name the old package
    for message in v1.message_type:
        for f in message.field:
            if f.type_name.startswith(f".{_V1ALPHA_PACKAGE}."):
                f.type_name = ".grpc.reflection.v1." + f.type_name.removeprefix(f".{_V1ALPHA_PACKAGE}.")
    for service in v1.service:
        for method in service.method:
            for attr in ("input_type", "output_type"):
                name = getattr(method, attr)
                setattr(method, attr, ".grpc.reflection.v1." + name.removeprefix(f".{_V1ALPHA_PACKAGE}."))
    pool.AddSerializedFile(v1.SerializeToString())


def enable(
    service_names: Sequence[str], server: grpc.aio.Server, streams: OpenStreams | None = None
) -> _Paced:
    """Serve reflection (v1 and v1alpha) listing ``service_names`` and both reflection services,
    its streams counted in ``streams`` (none: not bounded); the servicer."""
    _add_v1_descriptor()
    names = [*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME]
    pool = _Pool(descriptor_pool.Default())
    servicer = _Paced(names, pool, streams if streams is not None else OpenStreams(0))
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {"ServerReflectionInfo": handler}),)
    )
    return servicer
