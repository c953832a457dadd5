"""gRPC health (``grpc.health.v1.Health``): Check and Watch from grpcio-health-checking, and List.

The library's asyncio servicer leaves List to the generated base class, which raises
NotImplementedError (a traceback in the log per call, and UNKNOWN in the metrics), while
reflection advertises it. List here answers what Check answers, for every name health knows,
from the statuses this servicer was given (``set``), a snapshot as the protocol allows.
"""

from __future__ import annotations

from typing import Any

from grpc_health.v1 import health, health_pb2

NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class HealthServicer(health.aio.HealthServicer):  # type: ignore[misc,name-defined]
    """The library's servicer, with List."""

    def __init__(self) -> None:
        super().__init__()
        self._statuses: dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}
        self._draining = False

    async def set(self, service: str, status: int) -> None:
        await super().set(service, status)
        if not self._draining:
            self._statuses[service] = status

    async def enter_graceful_shutdown(self) -> None:
        self._draining = True
        for name in self._statuses:
            self._statuses[name] = NOT_SERVING
        await super().enter_graceful_shutdown()

    async def List(
        self, request: health_pb2.HealthListRequest, context: Any
    ) -> health_pb2.HealthListResponse:
        response = health_pb2.HealthListResponse()
        for name, status in sorted(self._statuses.items()):
            response.statuses[name].status = status
        return response
