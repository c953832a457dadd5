"""The dealer clients: ``DealerClient`` (blocking) and ``AsyncDealerClient`` (asyncio).

Both describe each operation with the same ``calls`` function and differ only
in how they send it; tests/client/test_client_surface.py checks they expose
the same methods with the same signatures.

    with DealerClient("127.0.0.1:50051") as dealer:
        hand = dealer.open_hand("standard")
        dealer.shuffle(hand.hand_id, round.seeds)  # the players' revealed seeds (fairdeck.client.seeds)
        hole = dealer.draw(hand.hand_id, 2)
        closed = dealer.close(hand.hand_id)
        closed.verify(commitment=hand.commitment)

Against a dealer with TLS and API tokens::

    DealerClient("dealer.example:443", credentials=tls_credentials(ca="ca.pem"), api_token=token)

(``tls_credentials(ca=, cert=, key=)`` also makes mTLS credentials.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TypeVar

import grpc

from fairdeck.client import calls
from fairdeck.client.base import AsyncClient, SyncClient
from fairdeck.client.calls import Call, ClientConfig, Deal, tls_credentials
from fairdeck.client.exceptions import from_rpc_error
from fairdeck.client.models import DealtHand, Draw, Hand
from fairdeck.v1 import dealer_pb2_grpc

R = TypeVar("R")
_REMEMBERED_HANDS = 4096


class _Hands:
    """The hands this client gave seeds to (the latest few thousand): a shuffle with no seeds adds
    the SDK's seed only to a hand that has none from this client.

    (It does not remember deck positions to send them as ``expected_position`` by itself: a hand
    that two clients draw from would make one client's memory stale, and a stale position that
    happens to equal the other's last draw would answer that draw's cards again. The caller, who
    knows how many cards it dealt, passes the position.)
    """

    def __init__(self) -> None:
        self._seeded: OrderedDict[str, None] = OrderedDict()

    @staticmethod
    def _keep(memory: OrderedDict[str, R], hand_id: str, value: R) -> None:
        memory[hand_id] = value
        memory.move_to_end(hand_id)
        while len(memory) > _REMEMBERED_HANDS:
            memory.popitem(last=False)

    def seeded(self, hand_id: str) -> None:
        self._keep(self._seeded, hand_id, None)

    def needs_sdk_seed(self, hand_id: str, client_seeds: Sequence[str | bytes]) -> bool:
        return not client_seeds and hand_id not in self._seeded


def _hands(client: object) -> _Hands:
    hands = client.__dict__.get("_hands")
    if hands is None:
        hands = client.__dict__["_hands"] = _Hands()
    return hands


__all__ = ["AsyncDealerClient", "ClientConfig", "Deal", "DealerClient", "tls_credentials"]


class DealerClient(SyncClient):
    """A blocking client for the dealer."""

    _STUB = dealer_pb2_grpc.DealerServiceStub

    def _run(self, call: Call[R]) -> R:
        return call.parse(self._unary(call.method, call.request))

    def open_hand(self, deck: str = "standard", *, request_id: str | None = None) -> Hand:
        """Open a hand; its commitment is published before any card is seen."""
        return self._run(calls.open_hand(deck, request_id))

    def add_client_seeds(self, hand_id: str, client_seeds: Sequence[str | bytes]) -> Hand:
        """Add seeds (seat by seat) before the shuffle."""
        hand = self._run(calls.add_client_seeds(hand_id, client_seeds))
        _hands(self).seeded(hand_id)
        return hand

    def shuffle(self, hand_id: str, client_seeds: Sequence[str | bytes] = ()) -> Hand:
        """Fix the client seeds (adding these last ones) and the deck. Pass the players' revealed
        seeds (``fairdeck.client.seeds.SeedRound``). A hand given no seeds by this client gets one
        fresh random seed of the SDK's, marked ``fairdeck-sdk-seed:`` in the transcript."""
        sdk = _hands(self).needs_sdk_seed(hand_id, client_seeds)
        return self._run(calls.shuffle(hand_id, client_seeds, add_sdk_seed=sdk))

    def draw(self, hand_id: str, count: int = 1, *, expected_position: int | None = None) -> Draw:
        """The next ``count`` cards from the top. Pass ``expected_position`` (the number of cards
        dealt so far) to make the call safe to retry: the same call again after a lost answer
        returns the same cards, and a draw from another position is refused (``WrongPosition``)
        rather than dealing the next cards."""
        return self._run(calls.draw(hand_id, count, expected_position))

    def deal(self, hand_id: str) -> Draw:
        """Every card not dealt yet, in order."""
        return self._run(calls.deal(hand_id))

    def deal_new_hand(
        self,
        deck: str = "standard",
        *,
        client_seeds: Sequence[str | bytes] = (),
        request_id: str | None = None,
    ) -> Deal:
        """Open, shuffle and deal a whole deck in one call."""
        return self._run(calls.deal_new_hand(deck, client_seeds, request_id))

    def close(self, hand_id: str) -> Hand:
        """Close the hand: the seed is revealed and the transcript returned."""
        return self._run(calls.close(hand_id))

    def get(self, hand_id: str) -> Hand:
        """A hand's state (and transcript once closed)."""
        return self._run(calls.get(hand_id))

    def deal_hands(
        self,
        deck: str = "standard",
        hand_count: int = 1,
        *,
        client_seeds: Sequence[str | bytes] = (),
        close: bool = False,
    ) -> Iterator[DealtHand]:
        """Open and deal many hands; yields them as the dealer streams them."""
        request = calls.deal_hands_request(deck, hand_count, client_seeds, close)
        try:
            for response in self._stub.DealHands(request, timeout=None, metadata=self.config.call_metadata()):
                yield from calls.dealt_hands(response)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e


class AsyncDealerClient(AsyncClient):
    """An asyncio client for the dealer; same methods as DealerClient, awaited."""

    _STUB = dealer_pb2_grpc.DealerServiceStub

    async def _run(self, call: Call[R]) -> R:
        return call.parse(await self._unary(call.method, call.request))

    async def open_hand(self, deck: str = "standard", *, request_id: str | None = None) -> Hand:
        """Open a hand; its commitment is published before any card is seen."""
        return await self._run(calls.open_hand(deck, request_id))

    async def add_client_seeds(self, hand_id: str, client_seeds: Sequence[str | bytes]) -> Hand:
        """Add seeds (seat by seat) before the shuffle."""
        hand = await self._run(calls.add_client_seeds(hand_id, client_seeds))
        _hands(self).seeded(hand_id)
        return hand

    async def shuffle(self, hand_id: str, client_seeds: Sequence[str | bytes] = ()) -> Hand:
        """Fix the client seeds (adding these last ones) and the deck. Pass the players' revealed
        seeds (``fairdeck.client.seeds.SeedRound``). A hand given no seeds by this client gets one
        fresh random seed of the SDK's, marked ``fairdeck-sdk-seed:`` in the transcript."""
        sdk = _hands(self).needs_sdk_seed(hand_id, client_seeds)
        return await self._run(calls.shuffle(hand_id, client_seeds, add_sdk_seed=sdk))

    async def draw(self, hand_id: str, count: int = 1, *, expected_position: int | None = None) -> Draw:
        """The next ``count`` cards from the top. Pass ``expected_position`` (the number of cards
        dealt so far) to make the call safe to retry: the same call again after a lost answer
        returns the same cards, and a draw from another position is refused (``WrongPosition``)
        rather than dealing the next cards."""
        return await self._run(calls.draw(hand_id, count, expected_position))

    async def deal(self, hand_id: str) -> Draw:
        """Every card not dealt yet, in order."""
        return await self._run(calls.deal(hand_id))

    async def deal_new_hand(
        self,
        deck: str = "standard",
        *,
        client_seeds: Sequence[str | bytes] = (),
        request_id: str | None = None,
    ) -> Deal:
        """Open, shuffle and deal a whole deck in one call."""
        return await self._run(calls.deal_new_hand(deck, client_seeds, request_id))

    async def close(self, hand_id: str) -> Hand:
        """Close the hand: the seed is revealed and the transcript returned."""
        return await self._run(calls.close(hand_id))

    async def get(self, hand_id: str) -> Hand:
        """A hand's state (and transcript once closed)."""
        return await self._run(calls.get(hand_id))

    async def deal_hands(
        self,
        deck: str = "standard",
        hand_count: int = 1,
        *,
        client_seeds: Sequence[str | bytes] = (),
        close: bool = False,
    ) -> AsyncIterator[DealtHand]:
        """Open and deal many hands; yields them as the dealer streams them."""
        request = calls.deal_hands_request(deck, hand_count, client_seeds, close)
        try:
            async for response in self._stub.DealHands(
                request, timeout=None, metadata=self.config.call_metadata()
            ):
                for hand in calls.dealt_hands(response):
                    yield hand
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
