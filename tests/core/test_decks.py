"""Deck specs and canonical order (spec section 1.3)."""

from __future__ import annotations

import math

import pytest

from fairdeck import SPEC_NAMES, DeckSpec, DeckSpecError, InvalidInput

SIZES = {
    "standard": 52,
    "jokers": 54,
    "short": 36,
    **{f"shoe-{n}": 52 * n for n in range(1, 9)},
}


def test_spec_names_are_exactly_the_eleven_of_the_spec() -> None:
    assert ("standard", "jokers", "short", *(f"shoe-{n}" for n in range(1, 9))) == SPEC_NAMES


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_size_and_canonical_order_is_ascending_id(name: str) -> None:
    spec = DeckSpec.parse(name)
    assert spec.name == name
    assert spec.size == SIZES[name] == len(spec.cards)
    assert list(spec.card_ids) == sorted(set(spec.card_ids))
    assert [card.id for card in spec.cards] == list(spec.card_ids)
    assert spec.permutations == math.factorial(spec.size)


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_code_form_of_each_deck(name: str) -> None:
    codes = [card.code for card in DeckSpec.parse(name).cards]
    if name.startswith("shoe-"):
        assert all(len(code) == 4 and code[2] == "." for code in codes)
        assert codes[0] == "2c.1"
        assert codes[-1] == f"As.{name[5:]}"
    else:
        assert all("." not in code for code in codes)


def test_standard_canonical_order_starts_with_clubs_and_ends_with_the_ace_of_spades() -> None:
    codes = [card.code for card in DeckSpec.parse("standard").cards]
    assert codes[:13] == ["2c", "3c", "4c", "5c", "6c", "7c", "8c", "9c", "Tc", "Jc", "Qc", "Kc", "Ac"]
    assert codes[13] == "2d"
    assert codes[-1] == "As"


def test_jokers_is_standard_then_x1_x2() -> None:
    jokers = [card.code for card in DeckSpec.parse("jokers").cards]
    standard = [card.code for card in DeckSpec.parse("standard").cards]
    assert jokers == [*standard, "X1", "X2"]


def test_short_is_ranks_six_to_ace() -> None:
    codes = [card.code for card in DeckSpec.parse("short").cards]
    assert codes[:9] == ["6c", "7c", "8c", "9c", "Tc", "Jc", "Qc", "Kc", "Ac"]
    assert {code[0] for code in codes} == set("6789TJQKA")
    assert all(card_id % 13 >= 4 for card_id in DeckSpec.parse("short").card_ids)


def test_shoe_1_has_the_ids_of_standard_in_shoe_form() -> None:
    shoe, standard = DeckSpec.parse("shoe-1"), DeckSpec.parse("standard")
    assert shoe.card_ids == standard.card_ids
    assert [c.code for c in shoe.cards] == [f"{c.code}.1" for c in standard.cards]


@pytest.mark.parametrize(
    "name", ["", "Standard", "STANDARD", "shoe-0", "shoe-9", "shoe-01", "shoe-1 ", "shoe", "joker", "short "]
)
def test_unknown_specs_are_rejected(name: str) -> None:
    with pytest.raises(DeckSpecError, match="unknown deck spec"):
        DeckSpec.parse(name)


@pytest.mark.parametrize("value", [None, 52, b"standard"])
def test_non_string_spec_is_rejected(value: object) -> None:
    with pytest.raises(DeckSpecError):
        DeckSpec.parse(value)  # type: ignore[arg-type]


def test_deck_spec_error_is_invalid_input() -> None:
    assert issubclass(DeckSpecError, InvalidInput)


@pytest.mark.parametrize(
    ("name", "card_id", "code"),
    [("standard", 51, "As"), ("jokers", 52, "X1"), ("short", 4, "6c"), ("shoe-2", 103, "As.2")],
)
def test_card_for_id(name: str, card_id: int, code: str) -> None:
    assert DeckSpec.parse(name).card_for_id(card_id).code == code


@pytest.mark.parametrize(
    ("name", "card_id"), [("standard", 52), ("short", 0), ("short", 3), ("shoe-2", 104), ("jokers", -1)]
)
def test_card_for_id_rejects_cards_of_other_decks(name: str, card_id: int) -> None:
    with pytest.raises(DeckSpecError):
        DeckSpec.parse(name).card_for_id(card_id)


@pytest.mark.parametrize("name", ["standard", "short", "jokers", "shoe-2"])
def test_cards_for_ids_is_card_for_id_of_each(name: str) -> None:
    spec = DeckSpec.parse(name)
    ids = list(reversed(spec.card_ids))
    assert spec.cards_for_ids(ids) == tuple(spec.card_for_id(i) for i in ids)


@pytest.mark.parametrize(
    ("name", "bad"), [("standard", 52), ("short", 0), ("standard", True), ("standard", 1.0)]
)
def test_cards_for_ids_refuses_as_card_for_id_and_names_the_id(name: str, bad: object) -> None:
    spec = DeckSpec.parse(name)
    with pytest.raises(DeckSpecError, match=f"card id {bad!r} is not"):
        spec.cards_for_ids([spec.card_ids[0], bad])  # type: ignore[list-item]
