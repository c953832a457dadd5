"""Hands of a closed batch (``deal_hands(..., close=True)``) carry their transcript and verify
like single hands (regression: they had neither, so a caller had to build each transcript by
hand to check it). The transcript holds the client seeds this client sent, so a dealer that
dealt from other seeds fails the check. Against a real dealer."""

from __future__ import annotations

import asyncio
import dataclasses
import unicodedata

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient, DealtHand
from fairdeck.core.decks import SPEC_NAMES
from fairdeck.core.errors import VerificationError
from fairdeck.core.transcript import Transcript
from tests.support.fixtures import DealerFactory

SEEDS = ["café", b"\x00table-7"]  # text not in NFC form: the dealer normalises it first
CAFE_NFD = unicodedata.normalize("NFD", "café")


@pytest.fixture(scope="module")
def target(module_dealer_factory: DealerFactory) -> str:
    return module_dealer_factory("batch", rate_limit=0, max_open_hands=0).target


@pytest.mark.parametrize("deck", SPEC_NAMES)
def test_every_hand_of_a_closed_batch_verifies(target: str, deck: str) -> None:
    with DealerClient(target) as c:
        hands = list(c.deal_hands(deck, 3, client_seeds=[CAFE_NFD, SEEDS[1]], close=True))
        assert len(hands) == 3
        for hand in hands:
            assert hand.transcript is not None
            assert hand.transcript.client_seeds == ("café".encode(), SEEDS[1])
            hand.verify()
            hand.verify(commitment=hand.commitment)
            # The same hand read back singly is the same transcript.
            assert c.get(hand.hand_id).transcript == hand.transcript


def test_a_batch_of_more_than_one_message_verifies_and_without_seeds_too(target: str) -> None:
    with DealerClient(target) as c:
        hands = list(c.deal_hands("short", 600, close=True))  # 256 hands a message
    assert len({h.hand_id for h in hands}) == 600
    for hand in hands:
        assert hand.transcript is not None and hand.transcript.client_seeds == ()
        hand.verify()


def test_the_asyncio_client_gives_verifiable_batch_hands(target: str) -> None:
    async def run() -> list[DealtHand]:
        async with AsyncDealerClient(target) as c:
            return [h async for h in c.deal_hands("standard", 2, client_seeds=SEEDS, close=True)]

    for hand in asyncio.run(run()):
        hand.verify()


def test_a_batch_left_open_has_nothing_to_verify_until_each_hand_is_closed(target: str) -> None:
    with DealerClient(target) as c:
        (hand,) = c.deal_hands("standard", 1, client_seeds=SEEDS)
        assert hand.transcript is None and hand.server_seed is None
        with pytest.raises(VerificationError) as e:
            hand.verify()
        assert e.value.step == "malformed"
        closed = c.close_hand(hand.hand_id)
    closed.verify(commitment=hand.commitment, dealt=hand.cards)


def tampered(hand: DealtHand, **changes: object) -> DealtHand:
    assert hand.transcript is not None
    return dataclasses.replace(hand, transcript=dataclasses.replace(hand.transcript, **changes))


def test_a_tampered_batch_hand_fails_at_its_step(target: str) -> None:
    with DealerClient(target) as c:
        (hand, other) = c.deal_hands("standard", 2, client_seeds=SEEDS, close=True)
    assert hand.transcript is not None and other.transcript is not None
    t: Transcript = hand.transcript
    cases: list[tuple[DealtHand, str]] = [
        (tampered(hand, server_seed=other.transcript.server_seed), "commitment"),
        (tampered(hand, client_seeds=(b"someone else's seed",)), "deck"),
        (tampered(hand, cards=(t.cards[1], t.cards[0], *t.cards[2:])), "deck"),
        (dataclasses.replace(hand, commitment=other.commitment), "commitment"),
        (dataclasses.replace(hand, cards=other.cards), "deck"),  # not the cards the deck says
    ]
    for bad, step in cases:
        with pytest.raises(VerificationError) as e:
            bad.verify()
        assert e.value.step == step
    with pytest.raises(VerificationError) as seen_elsewhere:
        hand.verify(commitment=other.commitment)
    assert seen_elsewhere.value.step == "commitment"
