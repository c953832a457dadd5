"""The dealer's one gRPC interceptor: its layers fused, made once per method.

The dealer's layers, outermost first: observing (metrics and the access
log, metrics.py), the default deadline and the abuse limits (limits.py) on
either side of authentication (auth.py). As four grpc.aio interceptors, each
call ran four ``intercept_service`` coroutines, and each of them built a new
method handler and new closures for the call; layers with nothing to do (no
default deadline, both limits off) ran all the same. ``CallInterceptor``
asks each layer once per method for its wrapper (``wrap``), leaves out the
layers that have nothing to do for that method, and hands gRPC the same
wrapped handler for every later call: a call pays one lookup, then only the
work its layers really do. Their order, and what each does, is unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from fairdeck_server.limits import ServerInterceptor

if TYPE_CHECKING:  # generic in the stubs only
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler


class Layer(Protocol):
    def wrap(self, method: str, handler: Handler) -> Handler:
        """``handler`` with this layer around it, for every call of ``method``; ``handler``
        itself when the layer has nothing to do for that method."""
        ...


class CallInterceptor(ServerInterceptor):
    """``layers`` (outermost first) as one interceptor, wrapped once per method."""

    def __init__(self, layers: Sequence[Layer]) -> None:
        self._inner_first = tuple(reversed(layers))
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}
        """method -> (the servicer's handler, it wrapped). Only registered methods have a
        handler, so this holds at most one entry per method the server serves."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None:
            return handler  # an unknown method: gRPC answers UNIMPLEMENTED
        method: str = details.method
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = handler
        for layer in self._inner_first:
            wrapped = layer.wrap(method, wrapped)
        self._wrapped[method] = (handler, wrapped)
        return wrapped
