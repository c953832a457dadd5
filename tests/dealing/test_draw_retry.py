"""A retried draw is safe: DrawCards with expected_position answers the same cards again for the
same draw, and refuses a stale one (regression: a draw retried after a lost answer dealt the next
cards, so a game server could deal a card to two players without anyone seeing it).

The game server passes the position (it knows how many cards it dealt); the SDK does not guess it
from memory, because two clients drawing from one hand would make that memory stale
(tests/storage/test_replicas.py draws one hand through two replicas)."""

from __future__ import annotations

import grpc
import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import Unavailable, WrongPosition
from fairdeck.v1 import dealer_pb2, dealer_pb2_grpc
from tests.support.cutting_proxy import CuttingProxy
from tests.support.dealers import RunningDealer


@pytest.fixture(scope="module")
def target(unlimited_dealer: RunningDealer) -> str:
    return unlimited_dealer.target


def test_the_same_draw_again_answers_the_same_cards_and_a_stale_one_is_refused(target: str) -> None:
    with DealerClient(target) as dealer:
        hand = dealer.open_hand("standard")
        dealer.shuffle(hand.hand_id, [b"s" * 32])
        first = dealer.draw(hand.hand_id, 2, expected_position=0)
        again = dealer.draw(hand.hand_id, 2, expected_position=0)
        assert (again.cards, again.position) == (first.cards, 0)
        assert dealer.get(hand.hand_id).dealt_count == 2  # nothing moved
        nxt = dealer.draw(hand.hand_id, 3, expected_position=2)
        assert nxt.position == 2 and nxt.cards != first.cards
        with pytest.raises(WrongPosition) as e:
            dealer.draw(hand.hand_id, 1, expected_position=1)
        assert e.value.field == "expected_position" and e.value.reason == "WRONG_POSITION"
        with pytest.raises(WrongPosition):
            dealer.draw(hand.hand_id, 2, expected_position=0)  # the first draw, but the hand moved on
        closed = dealer.close_hand(hand.hand_id)
    assert closed.transcript is not None
    assert [c.code for c in first.cards + nxt.cards] == closed.transcript.codes()[:5]


def test_without_expected_position_a_draw_deals_the_next_cards(target: str) -> None:
    """The old contract, for callers that send no position (raw stub: the SDK always sends it)."""
    with DealerClient(target) as dealer:
        hand = dealer.open_hand("standard")
    with grpc.insecure_channel(target) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        a = stub.DrawCards(dealer_pb2.DrawCardsRequest(hand_id=hand.hand_id, count=2))
        b = stub.DrawCards(dealer_pb2.DrawCardsRequest(hand_id=hand.hand_id, count=2))
    assert (a.position, b.position) == (0, 2)


def test_a_draw_whose_answer_is_lost_is_retried_and_gets_the_same_cards(target: str) -> None:
    proxy = CuttingProxy(target)
    try:
        with DealerClient(proxy.target, timeout=10, retries=0) as dealer:  # the game server retries
            hand = dealer.open_hand("standard")
            dealer.shuffle(hand.hand_id, [b"r" * 32])
            dealer.draw(hand.hand_id, 2, expected_position=0)
            proxy.armed.set()
            with pytest.raises(Unavailable):  # committed by the dealer, its answer cut on the way
                dealer.draw(hand.hand_id, 3, expected_position=2)
            assert proxy.cut.is_set()
            with DealerClient(target) as direct:
                assert direct.get(hand.hand_id).dealt_count == 5  # the lost draw did happen
            retried = dealer.draw(hand.hand_id, 3, expected_position=2)  # the game server retries it
            assert retried.position == 2
            with DealerClient(target) as direct:
                assert direct.get(hand.hand_id).dealt_count == 5  # and it happened once
                closed = direct.close_hand(hand.hand_id)
        assert closed.transcript is not None
        assert [c.code for c in retried.cards] == closed.transcript.codes()[2:5]
    finally:
        proxy.close()


def test_the_cut_falls_on_the_answer_not_on_the_connections_own_frames() -> None:
    """Regression (a CI run: the lost draw had not happened, 2 cards dealt where 5 were expected):
    the proxy cut the 40th byte after arming, and three of the connection's own frames (PING acks,
    WINDOW_UPDATEs) came to 40 bytes before the answer did, so the client lost its call before the
    dealer committed it. Raw frames from a stand-in upstream: three PING acks, then an answer."""
    import socket

    from tests.support.waits import wait_for

    upstream = socket.create_server(("127.0.0.1", 0))
    proxy = CuttingProxy(f"127.0.0.1:{upstream.getsockname()[1]}")
    host, port = proxy.target.rsplit(":", 1)
    client = socket.create_connection((host, int(port)), timeout=10)
    try:
        dealer_side, _ = upstream.accept()
        proxy.armed.set()
        ping_ack = (8).to_bytes(3, "big") + bytes([0x6, 0x1]) + (0).to_bytes(4, "big") + b"p" * 8
        answer = (5).to_bytes(3, "big") + bytes([0x1, 0x4]) + (1).to_bytes(4, "big") + b"h" * 5
        dealer_side.sendall(ping_ack * 3 + answer)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
        wait_for("the proxy to cut", proxy.cut.is_set)
        assert received == ping_ack * 3  # every frame of the connection's own, and no answer
        dealer_side.close()
    finally:
        client.close()
        proxy.close()
        upstream.close()
