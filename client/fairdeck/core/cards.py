"""Playing cards: the card model, its two-character codes and integer ids.

A card is a standard card (rank and suit), one of two jokers, or a card of a shoe, which also
carries the number of the deck (1 to 8) it came from, so that two 7 of hearts are never
confused. The codes (``RS``, ``X1``, ``X2``, ``RS.D``) and the integer ids, which are what
travels on the wire and what the spec shuffles, are docs/fairness-spec.md section 1.2.

>>> Card.parse("Td")
Card(code='Td')
>>> Card.parse("7h.3").deck, Card.parse("7h.3").id
(3, 135)
>>> Card.parse("X1").is_joker
True
"""

from __future__ import annotations

from dataclasses import dataclass

from fairdeck.core.errors import InvalidInput

RANKS = "23456789TJQKA"
SUITS = "cdhs"
SUIT_SYMBOLS = {"c": "\u2663", "d": "\u2666", "h": "\u2665", "s": "\u2660"}
JOKERS = ("X1", "X2")
MAX_SHOE_DECKS = 8
_STANDARD = 52


class CardError(InvalidInput):
    """A card code or card id that does not name a card."""


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card, identified by its code."""

    code: str

    def __post_init__(self) -> None:
        _parse(self.code)  # validates; the parse is cheap and cached below

    @classmethod
    def parse(cls, code: str) -> Card:
        """Parse a card code such as ``As``, ``X2`` or ``Td.4``; raise CardError."""
        if not isinstance(code, str):
            raise CardError(f"card code must be a string, got {type(code).__name__}")
        return cls(code)

    @classmethod
    def from_id(cls, card_id: int, *, shoe: bool = False) -> Card:
        """The card with this integer id; ``shoe`` selects the ``RS.D`` form."""
        return cls(code_for_id(card_id, shoe=shoe))

    @property
    def id(self) -> int:
        return _parse(self.code)[0]

    @property
    def is_joker(self) -> bool:
        return self.code in JOKERS

    @property
    def rank(self) -> str | None:
        return None if self.is_joker else self.code[0]

    @property
    def suit(self) -> str | None:
        return None if self.is_joker else self.code[1]

    @property
    def deck(self) -> int | None:
        """The deck number within a shoe, or None for a single-deck card."""
        return _parse(self.code)[1]

    def pretty(self) -> str:
        """The code with a suit symbol: ``A♠``, ``T♦.3``, ``X1``."""
        if self.is_joker:
            return self.code
        text = self.code[0] + SUIT_SYMBOLS[self.code[1]]
        return text + self.code[2:]

    def __str__(self) -> str:
        return self.code


def code_for_id(card_id: int, *, shoe: bool = False) -> str:
    """The code of a card id (docs/fairness-spec.md section 1.2 gives the numbering)."""
    if isinstance(card_id, bool) or not isinstance(card_id, int):
        raise CardError(f"card id must be an integer, got {type(card_id).__name__}")
    if shoe:
        if not 0 <= card_id < _STANDARD * MAX_SHOE_DECKS:
            raise CardError(f"shoe card id {card_id} out of range 0..{_STANDARD * MAX_SHOE_DECKS - 1}")
        deck, base = divmod(card_id, _STANDARD)
        return f"{_standard_code(base)}.{deck + 1}"
    if 0 <= card_id < _STANDARD:
        return _standard_code(card_id)
    if card_id in (52, 53):
        return JOKERS[card_id - _STANDARD]
    raise CardError(f"card id {card_id} out of range 0..53")


def _standard_code(base: int) -> str:
    suit, rank = divmod(base, 13)
    return RANKS[rank] + SUITS[suit]


_CACHE: dict[str, tuple[int, int | None]] = {}


def _parse(code: str) -> tuple[int, int | None]:
    """(id, deck number or None) for a code; raise CardError if malformed."""
    hit = _CACHE.get(code)
    if hit is not None:
        return hit
    parsed = _parse_uncached(code)
    if len(_CACHE) < 4096:  # the set of valid codes is 470; junk is not cached
        _CACHE[code] = parsed
    return parsed


def _parse_uncached(code: str) -> tuple[int, int | None]:
    if not isinstance(code, str):
        raise CardError(f"card code must be a string, got {type(code).__name__}")
    if code in JOKERS:
        return _STANDARD + JOKERS.index(code), None
    shown = code if len(code) <= 8 else code[:8] + "..."
    head, dot, tail = code.partition(".")
    if len(head) != 2 or head[0] not in RANKS or head[1] not in SUITS:
        raise CardError(
            f"malformed card code {shown!r}: want rank {RANKS!r} then suit {SUITS!r}, or X1/X2 for a joker"
        )
    base = 13 * SUITS.index(head[1]) + RANKS.index(head[0])
    if not dot:
        return base, None
    # Canonical deck numbers only: "1".."8", no sign, no leading zero, no spaces.
    if len(tail) != 1 or not "1" <= tail <= str(MAX_SHOE_DECKS):
        raise CardError(f"malformed card code {shown!r}: deck number must be 1..{MAX_SHOE_DECKS}")
    deck = int(tail)
    return _STANDARD * (deck - 1) + base, deck
