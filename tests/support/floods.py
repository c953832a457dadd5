"""Floods of the methods open to all (reflection, health Watch), from clients with no credentials,
each connection its own (a local subchannel pool: channels to one target share none), for the
tests, the fault scenarios and bench/open_floods.py. Everything here is grpc.aio on the caller's
event loop; a flood runs until its ``stop`` event is set.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2 as rp

from tests.support.connections import OWN_CONNECTION

REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
ASK = rp.ServerReflectionRequest(file_containing_symbol="fairdeck.v1.DealerService")


def channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=OWN_CONNECTION)


def reflection_call(
    ch: grpc.aio.Channel,
) -> grpc.aio.StreamStreamCall[rp.ServerReflectionRequest, rp.ServerReflectionResponse]:
    return ch.stream_stream(
        REFLECTION,
        request_serializer=rp.ServerReflectionRequest.SerializeToString,
        response_deserializer=rp.ServerReflectionResponse.FromString,
    )()


@dataclass
class Flood:
    """Open streams and how they ended, by status code name."""

    streams: int = 0
    answers: int = 0
    answered: int = 0
    """Streams that had at least one answer."""
    ended: Counter[str] = field(default_factory=Counter)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    async def close(self) -> None:
        self.stop.set()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self.channels), return_exceptions=True)


async def reflection_flood(target: str, streams: int, connections: int) -> Flood:
    """``streams`` reflection streams over ``connections`` connections, each asking again as soon
    as it has its answer, until stopped."""
    flood = Flood()
    flood.channels = [channel(target) for _ in range(connections)]

    async def one(ch: grpc.aio.Channel) -> None:
        call = reflection_call(ch)
        flood.streams += 1
        first = True
        try:
            while not flood.stop.is_set():
                await call.write(ASK)
                await call.read()
                flood.answers += 1
                flood.answered += first
                first = False
        except grpc.aio.AioRpcError as e:
            flood.ended[e.code().name] += 1
        finally:
            call.cancel()

    flood.tasks = [asyncio.create_task(one(flood.channels[i % connections])) for i in range(streams)]
    return flood


async def watch_flood(target: str, streams: int, connections: int) -> Flood:
    """``streams`` health Watch streams over ``connections`` connections, each read to its end."""
    flood = Flood()
    flood.channels = [channel(target) for _ in range(connections)]

    async def one(ch: grpc.aio.Channel) -> None:
        call = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest())
        flood.streams += 1
        first = True
        try:
            async for _ in call:
                flood.answers += 1
                flood.answered += first
                first = False
        except grpc.aio.AioRpcError as e:
            flood.ended[e.code().name] += 1

    flood.tasks = [asyncio.create_task(one(flood.channels[i % connections])) for i in range(streams)]
    return flood


async def grpcurl_session(target: str, requests: int = 10, timeout: float = 30) -> float:
    """What `grpcurl describe` does: one connection, one reflection stream, ``requests``
    questions one after another; the seconds it took (raises if it did not finish in time)."""
    began = time.monotonic()
    async with channel(target) as ch:
        call = reflection_call(ch)
        try:
            async with asyncio.timeout(timeout):
                for _ in range(requests):
                    await call.write(ASK)
                    answer = await call.read()
                    assert answer.WhichOneof("message_response") == "file_descriptor_response", answer
        finally:
            call.cancel()
    return time.monotonic() - began


async def check_latency(target: str, timeout: float = 5) -> float:
    """Seconds a health Check took on a new connection (raises past ``timeout``)."""
    began = time.monotonic()
    async with channel(target) as ch:
        await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
    return time.monotonic() - began
