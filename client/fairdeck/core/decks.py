"""Deck specifications: which cards a hand is dealt from, in canonical order.

The canonical order (ascending card id) is the order the shuffle starts from;
the written spec names it, so every implementation starts from the same list.

>>> spec = DeckSpec.parse("shoe-6")
>>> spec.size, spec.cards[0].code, spec.cards[-1].code
(312, '2c.1', 'As.6')
>>> DeckSpec.parse("short").size
36
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from fairdeck.core.cards import MAX_SHOE_DECKS, RANKS, Card, code_for_id
from fairdeck.core.errors import InvalidInput
from fairdeck.core.shuffle import factorial


class DeckSpecError(InvalidInput):
    """A deck spec name that fairdeck does not know."""


@dataclass(frozen=True)
class DeckSpec:
    """A named deck: its cards in canonical order."""

    name: str
    """Canonical name: ``standard``, ``jokers``, ``short`` or ``shoe-N`` (N 1..8)."""
    card_ids: tuple[int, ...] = field(repr=False)
    """Card ids in canonical (ascending) order."""
    shoe: bool = field(repr=False, default=False)
    """Whether codes carry a deck number (``As.3``)."""

    @staticmethod
    def parse(name: str) -> DeckSpec:
        """The spec with this canonical name; raise DeckSpecError otherwise."""
        if not isinstance(name, str):
            raise DeckSpecError(f"deck spec must be a string, got {type(name).__name__}")
        return _spec(name)

    @property
    def size(self) -> int:
        return len(self.card_ids)

    @property
    def cards(self) -> tuple[Card, ...]:
        return _cards(self.name)

    @property
    def permutations(self) -> int:
        """n!: the number of distinct orders of this deck."""
        return factorial(self.size)

    def contains(self, card_id: object) -> bool:
        """Whether ``card_id`` is the id of a card of this deck."""
        return isinstance(card_id, int) and not isinstance(card_id, bool) and card_id in _id_set(self.name)

    def card_for_id(self, card_id: int) -> Card:
        """The card with this id, checking that it belongs to this deck."""
        if not self.contains(card_id):
            raise DeckSpecError(f"card id {card_id!r} is not in deck {self.name!r}")
        return _card_by_id(self.name)[card_id]

    def cards_for_ids(self, card_ids: Iterable[int]) -> tuple[Card, ...]:
        """``card_for_id`` of each id, in one call: a batch deal converts millions of cards."""
        ids = tuple(card_ids)
        if all(type(i) is int for i in ids):  # no bool, whose True would find card 1
            try:
                return tuple(map(_card_by_id(self.name).__getitem__, ids))
            except KeyError:
                pass
        return tuple(self.card_for_id(i) for i in ids)  # names the first id not in the deck


SPEC_NAMES: tuple[str, ...] = (
    "standard",
    "jokers",
    "short",
    *(f"shoe-{n}" for n in range(1, MAX_SHOE_DECKS + 1)),
)


@cache
def _spec(name: str) -> DeckSpec:
    if name == "standard":
        return DeckSpec(name, tuple(range(52)))
    if name == "jokers":
        return DeckSpec(name, tuple(range(54)))
    if name == "short":
        six = RANKS.index("6")
        return DeckSpec(name, tuple(i for i in range(52) if i % 13 >= six))
    if name.startswith("shoe-") and name in SPEC_NAMES:
        decks = int(name[5:])
        return DeckSpec(name, tuple(range(52 * decks)), shoe=True)
    shown = name if len(name) <= 20 else name[:20] + "..."
    raise DeckSpecError(f"unknown deck spec {shown!r}; known: {', '.join(SPEC_NAMES)}")


@cache
def _cards(name: str) -> tuple[Card, ...]:
    spec = _spec(name)
    return tuple(Card(code_for_id(i, shoe=spec.shoe)) for i in spec.card_ids)


@cache
def _id_set(name: str) -> frozenset[int]:
    return frozenset(_spec(name).card_ids)


@cache
def _card_by_id(name: str) -> dict[int, Card]:
    """Each card of a deck by id, made once: a Card is immutable, and a batch deal converts millions."""
    return {card.id: card for card in _cards(name)}
