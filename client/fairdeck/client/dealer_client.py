"""The dealer clients: ``DealerClient`` (blocking) and ``AsyncDealerClient`` (asyncio).

Both describe each operation with the same ``calls`` function and differ only in how they send
it; tests/client/test_client_surface.py checks they expose the same methods with the same
signatures. Every call takes ``timeout=`` and ``request_id=``; ``close()`` (``aclose()``) closes
the channel. The methods, retries, TLS and tokens: docs/api.md, "The Python SDK".

    with DealerClient("127.0.0.1:50051") as dealer:
        hand = dealer.open_hand("standard")
        dealer.shuffle(hand.hand_id, round.seeds)  # the players' revealed seeds (player_seeds.py)
        closed = dealer.close_hand(hand.hand_id)
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TypeVar, overload

import grpc

from fairdeck.client import calls
from fairdeck.client.calls import (
    USE_CLIENT_DEFAULT,
    Call,
    ClientConfig,
    Deadline,
    Deal,
    DealtHands,
    Timeout,
    is_request_id,
    tls_credentials,
)
from fairdeck.client.channel import AsyncClient, SyncClient
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


__all__ = [
    "USE_CLIENT_DEFAULT",
    "AsyncDealerClient",
    "ClientConfig",
    "Deal",
    "DealerClient",
    "tls_credentials",
]

_CLOSE_IS_DEPRECATED = "close(hand_id) is deprecated: use close_hand(hand_id); close() closes the channel"


def _rid(config: ClientConfig, call: Call[R], request_id: str | None) -> str | None:
    """The request id to send: the caller's for this call; else the client's own (in its
    metadata), sent with the rest of that; else the call's (an open's idempotency key)."""
    if request_id is not None or config.request_id() is not None:
        return request_id
    return call.request_id if is_request_id(call.request_id) else None


def _open_rid(request_id: str | None) -> str | None:
    """An open's request id is its idempotency key too: one the dealer would not log is sent in
    the request only, where the dealer refuses it (INVALID_REQUEST_ID, field request_id)."""
    return request_id if is_request_id(request_id) else None


class DealerClient(SyncClient):
    """A blocking client for the dealer."""

    _STUB = dealer_pb2_grpc.DealerServiceStub

    def _run(self, call: Call[R], timeout: Timeout, request_id: str | None) -> R:
        rid = _rid(self.config, call, request_id)
        return call.parse(self._unary(call.method, call.request, timeout=timeout, request_id=rid))

    def open_hand(
        self, deck: str = "standard", *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Hand:
        """Open a hand; its commitment is published before any card is seen. The request id
        (made up if not given) is also the open's idempotency key: the same open again finds
        the same hand."""
        return self._run(calls.open_hand(deck, request_id), timeout, _open_rid(request_id))

    def add_client_seeds(
        self,
        hand_id: str,
        client_seeds: Sequence[str | bytes],
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Hand:
        """Add seeds (seat by seat) before the shuffle."""
        hand = self._run(calls.add_client_seeds(hand_id, client_seeds), timeout, request_id)
        _hands(self).seeded(hand_id)
        return hand

    def shuffle(
        self,
        hand_id: str,
        client_seeds: Sequence[str | bytes] = (),
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Hand:
        """Fix the client seeds (adding these last ones) and the deck. Pass the players' revealed
        seeds (``fairdeck.client.player_seeds.SeedRound``). A hand given no seeds by this client gets one
        fresh random seed of the SDK's, marked ``fairdeck-sdk-seed:`` in the transcript."""
        sdk = _hands(self).needs_sdk_seed(hand_id, client_seeds)
        return self._run(calls.shuffle(hand_id, client_seeds, add_sdk_seed=sdk), timeout, request_id)

    def draw(
        self,
        hand_id: str,
        count: int = 1,
        *,
        expected_position: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Draw:
        """The next ``count`` cards from the top. Pass ``expected_position`` (the number of cards
        dealt so far) to make the call safe to retry: the same call again after a lost answer
        returns the same cards, and a draw from another position is refused (``WrongPosition``)
        rather than dealing the next cards. The SDK retries only such a draw."""
        return self._run(calls.draw(hand_id, count, expected_position), timeout, request_id)

    def deal(
        self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Draw:
        """Every card not dealt yet, in order."""
        return self._run(calls.deal(hand_id), timeout, request_id)

    def deal_new_hand(
        self,
        deck: str = "standard",
        *,
        client_seeds: Sequence[str | bytes] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Deal:
        """Open, shuffle and deal a whole deck in one call. The request id (made up if not
        given) is also its idempotency key, as for ``open_hand``."""
        return self._run(calls.deal_new_hand(deck, client_seeds, request_id), timeout, _open_rid(request_id))

    def close_hand(
        self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Hand:
        """Close the hand: the seed is revealed and the transcript returned. Closing a closed
        hand returns it as it is."""
        return self._run(calls.close_hand(hand_id), timeout, request_id)

    @overload
    def close(self) -> None: ...

    @overload
    def close(self, hand_id: str) -> Hand: ...

    def close(self, hand_id: str | None = None) -> Hand | None:
        """Close the channel; calls still running end with ``Cancelled``.

        ``close(hand_id)`` is the old name of ``close_hand(hand_id)``: it closes that hand, with a
        DeprecationWarning, for one more release."""
        if hand_id is None:
            super().close()
            return None
        warnings.warn(_CLOSE_IS_DEPRECATED, DeprecationWarning, stacklevel=2)
        return self.close_hand(hand_id)

    def get(
        self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Hand:
        """A hand's state (and transcript once closed)."""
        return self._run(calls.get(hand_id), timeout, request_id)

    def deal_hands(
        self,
        deck: str = "standard",
        hand_count: int = 1,
        *,
        client_seeds: Sequence[str | bytes] = (),
        close: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Iterator[DealtHand]:
        """Open and deal many hands; yields them as the dealer streams them. With ``close``,
        each hand carries its transcript and ``verify()``. The stream has no deadline of the
        client's by default (the dealer's own applies): ``timeout`` sets one for all of it."""
        request = calls.deal_hands_request(deck, hand_count, client_seeds, close)
        parse = DealtHands(request)
        deadline = Deadline(timeout, None)
        metadata = self.config.call_metadata(request_id)
        try:
            for response in self._stub.DealHands(request, timeout=deadline.remaining(), metadata=metadata):
                yield from parse(response)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e


class AsyncDealerClient(AsyncClient):
    """An asyncio client for the dealer; same methods as DealerClient, awaited."""

    _STUB = dealer_pb2_grpc.DealerServiceStub

    async def _run(self, call: Call[R], timeout: Timeout, request_id: str | None) -> R:
        rid = _rid(self.config, call, request_id)
        return call.parse(await self._unary(call.method, call.request, timeout=timeout, request_id=rid))

    async def open_hand(
        self, deck: str = "standard", *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Hand:
        """Open a hand; its commitment is published before any card is seen. The request id
        (made up if not given) is also the open's idempotency key: the same open again finds
        the same hand."""
        return await self._run(calls.open_hand(deck, request_id), timeout, _open_rid(request_id))

    async def add_client_seeds(
        self,
        hand_id: str,
        client_seeds: Sequence[str | bytes],
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Hand:
        """Add seeds (seat by seat) before the shuffle."""
        hand = await self._run(calls.add_client_seeds(hand_id, client_seeds), timeout, request_id)
        _hands(self).seeded(hand_id)
        return hand

    async def shuffle(
        self,
        hand_id: str,
        client_seeds: Sequence[str | bytes] = (),
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Hand:
        """Fix the client seeds (adding these last ones) and the deck. Pass the players' revealed
        seeds (``fairdeck.client.player_seeds.SeedRound``). A hand given no seeds by this client gets one
        fresh random seed of the SDK's, marked ``fairdeck-sdk-seed:`` in the transcript."""
        sdk = _hands(self).needs_sdk_seed(hand_id, client_seeds)
        return await self._run(calls.shuffle(hand_id, client_seeds, add_sdk_seed=sdk), timeout, request_id)

    async def draw(
        self,
        hand_id: str,
        count: int = 1,
        *,
        expected_position: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Draw:
        """The next ``count`` cards from the top. Pass ``expected_position`` (the number of cards
        dealt so far) to make the call safe to retry: the same call again after a lost answer
        returns the same cards, and a draw from another position is refused (``WrongPosition``)
        rather than dealing the next cards. The SDK retries only such a draw."""
        return await self._run(calls.draw(hand_id, count, expected_position), timeout, request_id)

    async def deal(
        self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Draw:
        """Every card not dealt yet, in order."""
        return await self._run(calls.deal(hand_id), timeout, request_id)

    async def deal_new_hand(
        self,
        deck: str = "standard",
        *,
        client_seeds: Sequence[str | bytes] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> Deal:
        """Open, shuffle and deal a whole deck in one call. The request id (made up if not
        given) is also its idempotency key, as for ``open_hand``."""
        return await self._run(
            calls.deal_new_hand(deck, client_seeds, request_id), timeout, _open_rid(request_id)
        )

    async def close_hand(
        self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Hand:
        """Close the hand: the seed is revealed and the transcript returned. Closing a closed
        hand returns it as it is."""
        return await self._run(calls.close_hand(hand_id), timeout, request_id)

    @overload
    async def close(self) -> None: ...

    @overload
    async def close(self, hand_id: str) -> Hand: ...

    async def close(self, hand_id: str | None = None) -> Hand | None:
        """Close the channel; calls still running end with ``Cancelled``.

        ``close(hand_id)`` is the old name of ``close_hand(hand_id)``: it closes that hand, with a
        DeprecationWarning, for one more release."""
        if hand_id is None:
            await super().close()
            return None
        warnings.warn(_CLOSE_IS_DEPRECATED, DeprecationWarning, stacklevel=2)
        return await self.close_hand(hand_id)

    async def get(
        self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT, request_id: str | None = None
    ) -> Hand:
        """A hand's state (and transcript once closed)."""
        return await self._run(calls.get(hand_id), timeout, request_id)

    async def deal_hands(
        self,
        deck: str = "standard",
        hand_count: int = 1,
        *,
        client_seeds: Sequence[str | bytes] = (),
        close: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        request_id: str | None = None,
    ) -> AsyncIterator[DealtHand]:
        """Open and deal many hands; yields them as the dealer streams them. With ``close``,
        each hand carries its transcript and ``verify()``. The stream has no deadline of the
        client's by default (the dealer's own applies): ``timeout`` sets one for all of it."""
        request = calls.deal_hands_request(deck, hand_count, client_seeds, close)
        parse = DealtHands(request)
        deadline = Deadline(timeout, None)
        metadata = self.config.call_metadata(request_id)
        try:
            async for response in self._stub.DealHands(
                request, timeout=deadline.remaining(), metadata=metadata
            ):
                for hand in parse(response):
                    yield hand
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
