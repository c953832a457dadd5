"""Card codes and ids (spec section 1.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairdeck import Card, CardError, InvalidInput
from fairdeck.core.cards import RANKS, SUITS, code_for_id


@pytest.mark.parametrize(
    ("code", "card_id"),
    [("2c", 0), ("Ac", 12), ("2d", 13), ("Td", 21), ("As", 51), ("X1", 52), ("X2", 53)],
)
def test_standard_and_joker_ids(code: str, card_id: int) -> None:
    assert Card.parse(code).id == card_id
    assert code_for_id(card_id) == code


@pytest.mark.parametrize(
    ("code", "card_id", "deck"),
    [("2c.1", 0, 1), ("As.1", 51, 1), ("2c.2", 52, 2), ("7h.3", 135, 3), ("As.8", 415, 8)],
)
def test_shoe_ids(code: str, card_id: int, deck: int) -> None:
    card = Card.parse(code)
    assert (card.id, card.deck) == (card_id, deck)
    assert code_for_id(card_id, shoe=True) == code


def test_every_standard_id_round_trips_through_its_code() -> None:
    codes = [code_for_id(i) for i in range(54)]
    assert len(set(codes)) == 54
    for i, code in enumerate(codes):
        assert Card.parse(code).id == i
        assert Card.from_id(i).code == code


def test_every_shoe_id_round_trips_through_its_code() -> None:
    codes = [code_for_id(i, shoe=True) for i in range(416)]
    assert len(set(codes)) == 416
    for i, code in enumerate(codes):
        assert Card.parse(code).id == i
        assert Card.parse(code).deck == i // 52 + 1


def test_standard_id_is_13_times_suit_plus_rank() -> None:
    for s, suit in enumerate(SUITS):
        for r, rank in enumerate(RANKS):
            assert Card.parse(rank + suit).id == 13 * s + r


@pytest.mark.parametrize(
    "code",
    [
        "",
        "A",
        "as",
        "AS",
        "1s",
        "Ax",
        "As ",
        " As",
        "Ass",
        "X0",
        "X3",
        "x1",
        "X1.1",
        "As.",
        "As.0",
        "As.9",
        "As.01",
        "As.+1",
        "As.1 ",
        "As.10",
        "As..1",
        "\u0661s",
        "As.\u0661",
    ],
)
def test_malformed_codes_are_rejected(code: str) -> None:
    with pytest.raises(CardError):
        Card.parse(code)


@pytest.mark.parametrize("value", [None, 1, b"As", ["As"]])
def test_non_string_codes_are_rejected(value: object) -> None:
    with pytest.raises(CardError):
        Card.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("card_id", "shoe"), [(-1, False), (54, False), (-1, True), (416, True), (True, False)]
)
def test_ids_out_of_range_are_rejected(card_id: int, shoe: bool) -> None:
    with pytest.raises(CardError):
        code_for_id(card_id, shoe=shoe)


def test_card_error_is_invalid_input() -> None:
    assert issubclass(CardError, InvalidInput)
    assert issubclass(CardError, ValueError)


def test_card_properties() -> None:
    ten = Card.parse("Td.4")
    assert (ten.rank, ten.suit, ten.deck, ten.is_joker) == ("T", "d", 4, False)
    joker = Card.parse("X2")
    assert (joker.rank, joker.suit, joker.deck, joker.is_joker) == (None, None, None, True)
    assert Card.parse("As").deck is None
    assert str(Card.parse("Kh")) == "Kh"


@pytest.mark.parametrize(
    ("code", "pretty"), [("As", "A\u2660"), ("Td.3", "T\u2666.3"), ("X1", "X1"), ("2c", "2\u2663")]
)
def test_pretty(code: str, pretty: str) -> None:
    assert Card.parse(code).pretty() == pretty


@given(st.text(max_size=6))
def test_parse_never_raises_anything_but_card_error(text: str) -> None:
    try:
        card = Card.parse(text)
    except CardError:
        return
    assert code_for_id(card.id, shoe=card.deck is not None) == text
