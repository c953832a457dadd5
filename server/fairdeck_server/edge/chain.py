"""The dealer's one gRPC interceptor: its layers (interceptors.py) fused, wrapped once per method.

Each layer is asked once per method for its wrapper (``wrap``); layers with nothing to do for that
method are left out, and gRPC gets the same wrapped handler for every later call. So a call pays
one lookup, then only the work its layers really do (measured in bench/README.md, "Current
figures and verdicts").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc

if TYPE_CHECKING:  # generic in the stubs only
    Handler = grpc.RpcMethodHandler[Any, Any]
    ServerInterceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    ServerInterceptor = grpc.aio.ServerInterceptor


class Layer(Protocol):
    def wrap(self, method: str, handler: Handler) -> Handler:
        """``handler`` with this layer around it, for every call of ``method``; ``handler``
        itself when the layer has nothing to do for that method."""
        ...


class LayerInterceptor(ServerInterceptor):
    """An interceptor made of ``wrap(method, handler)``: a layer alone (tests), or the fused
    chain. A method nobody serves gets ``unknown(method)``: None, so gRPC answers UNIMPLEMENTED."""

    def wrap(self, method: str, handler: Handler) -> Handler:
        raise NotImplementedError

    def unknown(self, method: str) -> Handler | None:
        return None

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None:
            return self.unknown(details.method)
        return self.wrap(details.method, handler)


class CallInterceptor(LayerInterceptor):
    """``layers`` (outermost first) as one interceptor, wrapped once per method."""

    def __init__(self, layers: Sequence[Layer], unknown: Callable[[str], Handler] | None = None) -> None:
        """``unknown(method)``: the handler of a call to a method no servicer serves (made per
        call: the name is the caller's, so it is never a key of the cache)."""
        self._inner_first = tuple(reversed(layers))
        self._unknown = unknown
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}
        """method -> (the servicer's handler, it wrapped). Only registered methods have a
        handler, so this holds at most one entry per method the server serves."""

    def unknown(self, method: str) -> Handler | None:
        return None if self._unknown is None else self._unknown(method)

    def wrap(self, method: str, handler: Handler) -> Handler:
        """``handler`` inside every layer, wrapped once per method and kept."""
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = handler
        for layer in self._inner_first:
            wrapped = layer.wrap(method, wrapped)
        self._wrapped[method] = (handler, wrapped)
        return wrapped
