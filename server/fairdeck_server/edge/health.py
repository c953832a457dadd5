"""gRPC health (``grpc.health.v1.Health``): Check from grpcio-health-checking; Watch and List ours.

The library's asyncio Watch keeps a Condition per service name a client asks about, and nothing
bounds how many Watch streams anyone holds (20,000 took the dealer from 62 to 520 MiB). Here
every Watch waits on the one event that a change of any status replaces, and the streams one
client address holds open are counted with reflection's (``open_work.OpenStreams``): past the
limit a new one is refused TOO_MANY_STREAMS at once, so an idle stream costs a bounded, small
amount. The library leaves List to the generated base (NotImplementedError, a traceback per
call); ours answers Check's status for every name. Check and List never wait. Once draining
(``enter_graceful_shutdown``) every status is NOT_SERVING for good. A name may have a gate
(``gate``), asked at each Check and List: NOT_SERVING while it says no, whatever was set, so a
status bound to a deadline (a co-dealt claim's) is never read late; its setter publishes the change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from grpc_health.v1 import health, health_pb2

from fairdeck_server import refusals
from fairdeck_server.edge.peers import peer_address
from fairdeck_server.edge.status import abort
from fairdeck_server.policy.open_work import OpenStreams

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
STREAMS_RETRY = 1.0
"""Seconds a Watch refused TOO_MANY_STREAMS is asked to wait."""


class HealthServicer(health.aio.HealthServicer):  # type: ignore[misc,name-defined]
    """Health's statuses, by service name ("" the server's), and their watchers."""

    def __init__(self, streams: OpenStreams | None = None) -> None:
        super().__init__()  # its table answers Check (NOT_FOUND for a name it does not know)
        self.streams = streams if streams is not None else OpenStreams(0)
        self._statuses: dict[str, int] = {"": SERVING}
        self._draining = False
        self._changed = asyncio.Event()
        """Set, and replaced, when any status changes: every Watch waits on this one."""
        self._gates: dict[str, Callable[[], bool]] = {}

    def gate(self, service: str, able: Callable[[], bool]) -> None:
        """``service`` reads NOT_SERVING at any Check or List while ``able()`` is False (asked then,
        on the loop: cheap, never waiting). Watch streams see it when the status is next set."""
        self._gates[service] = able

    async def set(self, service: str, status: int) -> None:
        """``service``'s status from now on (ignored once draining)."""
        if self._draining:
            return
        await super().set(service, status)
        self._publish(service, status)

    def status(self, service: str) -> int:
        """``service``'s status now (SERVICE_UNKNOWN for a name never set), its gate asked."""
        status = int(self._statuses.get(service, SERVICE_UNKNOWN))
        able = self._gates.get(service)
        return NOT_SERVING if status == SERVING and able is not None and not able() else status

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: Any
    ) -> health_pb2.HealthCheckResponse:
        if request.service in self._gates and request.service in self._statuses:
            return health_pb2.HealthCheckResponse(status=self.status(request.service))
        return await super().Check(request, context)  # NOT_FOUND for a name it does not know

    async def enter_graceful_shutdown(self) -> None:
        if self._draining:
            return
        self._draining = True
        await super().enter_graceful_shutdown()
        for name in self._statuses:
            self._publish(name, NOT_SERVING)

    def _publish(self, service: str, status: int) -> None:
        if self._statuses.get(service) == status:
            return
        self._statuses[service] = status
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Any) -> None:
        connection = context.peer()
        address = peer_address(connection)
        if not self.streams.enter(address, connection):
            await abort(context, refusals.too_many_open_streams(self.streams.limit, STREAMS_RETRY))
        try:
            last = None
            while True:
                changed = self._changed
                status = self.status(request.service)
                if status != last:  # statuses in between may be missed: the latest is what counts
                    await context.write(health_pb2.HealthCheckResponse(status=status))
                    last = status
                await changed.wait()
        finally:
            self.streams.leave(address, connection)

    async def List(
        self, request: health_pb2.HealthListRequest, context: Any
    ) -> health_pb2.HealthListResponse:
        response = health_pb2.HealthListResponse()
        for name in sorted(self._statuses):
            response.statuses[name].status = self.status(name)
        return response
