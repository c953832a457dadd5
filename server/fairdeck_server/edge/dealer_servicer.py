"""The DealerService servicer: protobuf in, dealer calls, protobuf out.

It only turns requests into ``Dealer`` calls (the tenant comes from the bound principal) and
records into responses; errors end through status.py, so a client never sees a stack trace.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from fairdeck.core.decks import DeckSpec
from fairdeck.core.seeds import MAX_CLIENT_SEED_BYTES, MAX_CLIENT_SEED_WIRE_BYTES
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck.wire import Reason
from fairdeck_server import principal, refusals
from fairdeck_server.dealing.bulk import DealtSlice
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.edge.codeal_edge import CodealEdge
from fairdeck_server.edge.methods import check_parsed
from fairdeck_server.edge.status import fail, translated
from fairdeck_server.principal import Role
from fairdeck_server.storage.base import HandRecord, StoredHandState

if TYPE_CHECKING:
    from fairdeck_server.dealing.codeal_dealing import CodealDealer

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


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
    def __init__(
        self, dealer: Dealer, codeal: CodealDealer | None = None, *, codeal_default: bool = False
    ) -> None:
        self.dealer = dealer
        self.codeal = CodealEdge(codeal, codeal_default=codeal_default)

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
        if self.codeal.wants(request.mode):
            return pb.OpenHandResponse(hand=await self.codeal.open(self._tenant(context), request.deck))
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
        if await self.codeal.owns(request.hand_id):
            return await self.codeal.draw(self._tenant(context), request)
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
        if await self.codeal.owns(request.hand_id):
            releases = list(request.seat_releases)
            hand = await self.codeal.close(self._tenant(context), request.hand_id, releases)
            return pb.CloseHandResponse(hand=hand)
        record = await self.dealer.close(self._tenant(context), request.hand_id)
        return pb.CloseHandResponse(hand=self.hand(record))

    @translated
    async def GetHand(self, request: pb.GetHandRequest, context: Any) -> pb.GetHandResponse:
        if await self.codeal.owns(request.hand_id):
            hand = await self.codeal.get(self._tenant(context), request.hand_id)
            if principal.current().role is Role.AUDITOR and hand.state != pb.HAND_STATE_CLOSED:
                raise refusals.hand_not_found()  # as for ordinary hands: closed ones only
            return pb.GetHandResponse(hand=hand)
        record = await self.dealer.get(self._tenant(context), request.hand_id)
        if principal.current().role is Role.AUDITOR and record.state is not StoredHandState.CLOSED:
            # Auditors see closed hands only, and cannot tell an open hand from a missing one.
            raise refusals.hand_not_found()
        return pb.GetHandResponse(hand=self.hand(record))


def deal_hands_response(deck: str, chunk: Sequence[DealtSlice]) -> pb.DealHandsResponse:
    """One DealHands message, its hands built in place: no DealtHand or LogReceipt made
    only to be copied in."""
    response = pb.DealHandsResponse(deck=deck, version=chunk[0].batch.version)
    add = response.hands.add
    for dealt_slice in chunk:
        batch, first, k = dealt_slice.batch, dealt_slice.first_index, dealt_slice.batch.step
        revealed = batch.server_seeds
        for i, (hand_id, commitment, cards) in enumerate(
            zip(batch.hand_ids, batch.commitments, dealt_slice.cards, strict=True)
        ):
            dealt = add(hand_id=hand_id, commitment=commitment, cards=cards)
            dealt.commit_receipt.index = first + i * k
            if revealed is not None:
                dealt.server_seed = revealed[i]
                dealt.reveal_receipt.index = first + i * k + 1
    return response
