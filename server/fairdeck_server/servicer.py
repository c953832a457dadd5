"""The gRPC edge: protobuf in, dealer calls, protobuf out.

Errors are translated here and nowhere else: a DealerError becomes its
canonical status with a google.rpc.Status detail holding an ErrorInfo
(stable ``reason``, ``field`` in metadata); anything unexpected becomes
INTERNAL with a fixed message, logged server-side without request data.
A client never sees a stack trace.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2

from fairdeck.core.decks import DeckSpec
from fairdeck.core.seeds import MAX_CLIENT_SEED_BYTES, MAX_CLIENT_SEED_WIRE_BYTES
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck.wire import ERROR_DOMAIN, STATUS_DETAILS_KEY, Reason
from fairdeck_server import principal, refusals
from fairdeck_server.dealer import Dealer
from fairdeck_server.principal import Role
from fairdeck_server.storage.base import HandRecord, StoredHandState

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def status_metadata(
    code: grpc.StatusCode, message: str, reason: Reason, field: str | None, retry_delay: float | None = None
) -> tuple[tuple[str, bytes]]:
    """The grpc-status-details-bin trailer for an error (google.rpc.Status + ErrorInfo,
    and a RetryInfo when the caller should wait ``retry_delay`` seconds and try again)."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN)
    if field:
        info.metadata["field"] = field
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    if retry_delay is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(max(1_000_000, int(retry_delay * 1e9)))  # at least 1 ms
        status.details.add().Pack(retry)
    return ((STATUS_DETAILS_KEY, status.SerializeToString()),)


async def abort(context: grpc.aio.ServicerContext[Any, Any], error: refusals.DealerError) -> None:
    """End the call with ``error``'s status and details: the one way the servicers and
    the interceptors refuse a call."""
    code = grpc.StatusCode[error.status.name]
    message = str(error)
    try:
        await context.abort(
            code,
            message,
            trailing_metadata=status_metadata(code, message, error.reason, error.field, error.retry_delay),
        )
    except grpc.aio.AbortError:
        raise
    except Exception as e:
        if type(e).__name__ != "ExecuteBatchError":  # grpc's private class, matched by name
            raise
        # The status could not be sent: the call ended meanwhile (the client cancelled, or a
        # deadline passed as we answered). Nobody is left to tell; ended as gRPC ends a
        # cancelled call, where the batch error would reach gRPC and be logged as an ERROR.
        raise asyncio.CancelledError from None


class Malformed:
    """Stands in for a request body that does not parse as its message type."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


def _lenient(message_class: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message_class.FromString(data)
        except DecodeError:
            return Malformed(message_class.DESCRIPTOR.full_name)

    return parse


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


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


async def fail(context: grpc.aio.ServicerContext[Any, Any], exc: Exception, where: str) -> None:
    """End the call for ``exc``: its own status if a DealerError, else INTERNAL."""
    if isinstance(exc, refusals.DealerError):
        await abort(context, exc)
    log.error("unexpected %s in %s", type(exc).__name__, where, exc_info=exc)
    await abort(context, refusals.internal())


def translated(
    method: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]]:
    @functools.wraps(method)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]) -> Resp:
        try:
            check_parsed(request)
            return await method(self, request, context)
        except Exception as e:
            await fail(context, e, method.__name__)
        raise AssertionError("unreachable: abort raises")

    return wrapper


def client_seeds(seeds: Sequence[pb.ClientSeed]) -> list[str | bytes]:
    out: list[str | bytes] = []
    for i, seed in enumerate(seeds):
        kind = seed.WhichOneof("value")
        if kind is None:
            raise refusals.invalid(f"client_seeds[{i}]", Reason.INVALID_CLIENT_SEED, "set text or data")
        # Sized on the wire first: reading .text would decode megabytes into a str just to refuse it.
        size = seed.ByteSize()
        if size > MAX_CLIENT_SEED_WIRE_BYTES:
            raise refusals.invalid(
                f"client_seeds[{i}]",
                Reason.INVALID_CLIENT_SEED,
                f"client seed must be 1..{MAX_CLIENT_SEED_BYTES} bytes, got {size} bytes on the wire",
            )
        out.append(seed.text if kind == "text" else seed.data)
    return out


_STATES = {
    StoredHandState.OPEN: pb.HAND_STATE_OPEN,
    StoredHandState.SHUFFLED: pb.HAND_STATE_SHUFFLED,
    StoredHandState.CLOSED: pb.HAND_STATE_CLOSED,
}


@functools.lru_cache(maxsize=256)
def _deck_size(deck: str) -> int:
    return DeckSpec.parse(deck).size


class DealerServicer(dealer_pb2_grpc.DealerServiceServicer):
    def __init__(self, dealer: Dealer) -> None:
        self.dealer = dealer

    def _tenant(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        """The caller's tenant, bound by the auth interceptor (auth.py checked its role)."""
        return principal.current().tenant

    def hand(self, record: HandRecord, message: pb.Hand | None = None) -> pb.Hand:
        """``record`` as a Hand message; with ``message``, filled in place (a response's own
        ``hand`` field), so no Hand, LogReceipt or Timestamp is built only to be copied."""
        if message is None:
            message = pb.Hand()
        message.hand_id = record.hand_id
        message.deck = record.deck
        message.version = record.version
        message.commitment = record.commitment
        message.state = _STATES[record.state]
        if record.client_seeds:
            message.client_seeds.extend(record.client_seeds)
        message.dealt_count = record.dealt
        message.deck_size = _deck_size(record.deck)
        message.commit_receipt.index = record.commit_index
        message.create_time.FromMilliseconds(record.created_ms)
        if record.reveal_index is not None:
            message.reveal_receipt.index = record.reveal_index
        if record.closed_ms is not None:
            message.close_time.FromMilliseconds(record.closed_ms)
            t = self.dealer.transcript(record)
            message.transcript.CopyFrom(
                pb.Transcript(
                    version=t.version,
                    deck=t.deck,
                    hand_id=t.hand_id,
                    commitment=t.commitment,
                    server_seed=t.server_seed,
                    client_seeds=t.client_seeds,
                    cards=t.cards,
                )
            )
        return message

    @translated
    async def OpenHand(self, request: pb.OpenHandRequest, context: Any) -> pb.OpenHandResponse:
        record = await self.dealer.open_hand(self._tenant(context), request.deck, request.request_id)
        return pb.OpenHandResponse(hand=self.hand(record))

    @translated
    async def AddClientSeeds(
        self, request: pb.AddClientSeedsRequest, context: Any
    ) -> pb.AddClientSeedsResponse:
        record = await self.dealer.add_client_seeds(
            self._tenant(context), request.hand_id, client_seeds(request.client_seeds)
        )
        return pb.AddClientSeedsResponse(hand=self.hand(record))

    @translated
    async def ShuffleHand(self, request: pb.ShuffleHandRequest, context: Any) -> pb.ShuffleHandResponse:
        record = await self.dealer.shuffle(
            self._tenant(context), request.hand_id, client_seeds(request.client_seeds)
        )
        return pb.ShuffleHandResponse(hand=self.hand(record))

    @translated
    async def DrawCards(self, request: pb.DrawCardsRequest, context: Any) -> pb.DrawCardsResponse:
        expected = request.expected_position if request.HasField("expected_position") else None
        draw = await self.dealer.draw(self._tenant(context), request.hand_id, request.count, expected)
        return pb.DrawCardsResponse(
            cards=draw.cards, position=draw.position, remaining_count=draw.remaining, deck=draw.deck
        )

    @translated
    async def DealHand(self, request: pb.DealHandRequest, context: Any) -> pb.DealHandResponse:
        draw = await self.dealer.deal(self._tenant(context), request.hand_id)
        return pb.DealHandResponse(cards=draw.cards, position=draw.position, deck=draw.deck)

    @translated
    async def DealNewHand(self, request: pb.DealNewHandRequest, context: Any) -> pb.DealNewHandResponse:
        record, cards = await self.dealer.deal_new_hand(
            self._tenant(context), request.deck, client_seeds(request.client_seeds), request.request_id
        )
        response = pb.DealNewHandResponse(cards=cards)
        self.hand(record, response.hand)
        return response

    async def DealHands(
        self, request: pb.DealHandsRequest, context: Any
    ) -> AsyncIterator[pb.DealHandsResponse]:
        try:
            check_parsed(request)
            chunks = await self.dealer.deal_hands(
                self._tenant(context),
                request.deck,
                request.hand_count,
                client_seeds(request.client_seeds),
                request.close,
            )
            async for chunk in chunks:
                yield deal_hands_response(request.deck, chunk)
        except Exception as e:
            await fail(context, e, "DealHands")

    @translated
    async def CloseHand(self, request: pb.CloseHandRequest, context: Any) -> pb.CloseHandResponse:
        record = await self.dealer.close(self._tenant(context), request.hand_id)
        return pb.CloseHandResponse(hand=self.hand(record))

    @translated
    async def GetHand(self, request: pb.GetHandRequest, context: Any) -> pb.GetHandResponse:
        record = await self.dealer.get(self._tenant(context), request.hand_id)
        if principal.current().role is Role.AUDITOR and record.state is not StoredHandState.CLOSED:
            # Auditors see closed hands only, and cannot tell an open hand from a missing one.
            raise refusals.hand_not_found()
        return pb.GetHandResponse(hand=self.hand(record))


def deal_hands_response(
    deck: str, chunk: Sequence[tuple[HandRecord, tuple[int, ...], bytes | None]]
) -> pb.DealHandsResponse:
    """One DealHands message, its hands built in place: no DealtHand or LogReceipt made
    only to be copied in."""
    response = pb.DealHandsResponse(deck=deck, version=chunk[0][0].version)
    add = response.hands.add
    for record, cards, seed in chunk:
        dealt = add(hand_id=record.hand_id, commitment=record.commitment, cards=cards)
        dealt.commit_receipt.index = record.commit_index
        if seed:
            dealt.server_seed = seed
        if record.reveal_index is not None:
            dealt.reveal_receipt.index = record.reveal_index
    return response


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
