"""The transcript of a revealed hand and its strict JSON form (spec sections 6 and 7).

A transcript carries everything needed to re-derive and check a hand. Reading
one is strict, in the order of spec section 7: the raw text
(``fairdeck.core.strictjson``), then the ``version`` (an unknown one is step
``version`` whatever the rest holds), then the seven names, their types and hex. A lenient
verifier is a broken verifier: two verifiers must never disagree on a text.

>>> t = Transcript.from_json(Transcript(
...     version="fairdeck-v1", deck="short", hand_id="h1", commitment=bytes(32),
...     server_seed=bytes(34), client_seeds=(b"x",), cards=tuple(range(4, 13))).to_json())
>>> t.deck, t.client_seeds
('short', (b'x',))
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fairdeck.core import strictjson
from fairdeck.core.cards import Card
from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.versions import check_version

_HEX = re.compile(r"(?:[0-9a-f]{2})*")
_KEYS = {"version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards"}


@dataclass(frozen=True)
class Transcript:
    """A revealed hand: the inputs of the derivation, its commitment and its deck."""

    version: str
    """Algorithm version string, e.g. ``fairdeck-v1``."""
    deck: str
    """Deck spec name."""
    hand_id: str
    """The hand's id."""
    commitment: bytes
    """The 32-byte commitment published at open."""
    server_seed: bytes
    """The revealed server seed."""
    client_seeds: tuple[bytes, ...]
    """Client seeds as used (NFC UTF-8 for text), in order."""
    cards: tuple[int, ...]
    """The dealt order as card ids, top card first."""

    def codes(self) -> list[str]:
        """The dealt order as card codes."""
        spec = DeckSpec.parse(self.deck)
        return [spec.card_for_id(i).code for i in self.cards]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "deck": self.deck,
            "hand_id": self.hand_id,
            "commitment": self.commitment.hex(),
            "server_seed": self.server_seed.hex(),
            "client_seeds": [seed.hex() for seed in self.client_seeds],
            "cards": self.codes(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: object) -> Transcript:
        """Parse a JSON value strictly (spec section 7.2); raise VerificationError, step
        ``version`` for an unknown version (checked first) and ``malformed`` otherwise."""
        if not isinstance(data, dict):
            raise _malformed("transcript must be a JSON object")
        # Spec section 7.2: the version first, whatever the other names and values are,
        # because a later version may define other names, types, decks and codes.
        if "version" not in data:
            raise _malformed("transcript has no 'version'")
        version = _text(data, "version")
        try:
            check_version(version)
        except InvalidInput as e:
            raise VerificationError("version", str(e)) from None
        keys = set(data)
        if keys != _KEYS:
            missing, extra = sorted(_KEYS - keys), sorted(keys - _KEYS)
            raise _malformed(f"transcript keys: missing {missing}, unknown {extra}")
        seeds = data["client_seeds"]
        if not isinstance(seeds, list):
            raise _malformed("client_seeds must be a list of hex strings")
        codes = data["cards"]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise _malformed("cards must be a list of card codes")
        deck = _text(data, "deck")
        try:
            spec = DeckSpec.parse(deck)
        except InvalidInput as e:
            raise _malformed(f"deck: {e}") from None
        cards = []
        for position, code in enumerate(codes):
            # Each code must be this deck's own spelling of its card ("As.1" in a shoe).
            try:
                card = Card(code)
                ok = spec.contains(card.id) and spec.card_for_id(card.id).code == code
            except InvalidInput:
                ok = False
            if not ok:
                shown = code if len(code) <= 8 else code[:8] + "..."
                raise _malformed(f"cards[{position}]: {shown!r} is not a card of deck {deck!r}")
            cards.append(card.id)
        return cls(
            version=version,
            deck=deck,
            hand_id=_text(data, "hand_id"),
            commitment=_hex(data["commitment"], "commitment"),
            server_seed=_hex(data["server_seed"], "server_seed"),
            client_seeds=tuple(_hex(s, f"client_seeds[{i}]") for i, s in enumerate(seeds)),
            cards=tuple(cards),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Transcript:
        """Read a transcript's text (bytes as read from a file, or str); raise VerificationError."""
        return cls.from_dict(parse_json_text(text))


def parse_json_text(text: str | bytes) -> Any:
    """The JSON value of a transcript's text (spec section 7.1), or step ``malformed``."""
    try:
        return strictjson.loads(text)
    except strictjson.StrictJSONError as e:
        raise _malformed(str(e)) from None


def _malformed(message: str) -> VerificationError:
    return VerificationError("malformed", message)


def _text(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise _malformed(f"{key} must be a string")
    return value


def _hex(value: object, key: str) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise _malformed(f"{key} must be lower-case hex with an even number of digits")
    return bytes.fromhex(value)
