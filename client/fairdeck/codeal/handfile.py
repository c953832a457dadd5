"""The co-dealt hand proof (docs/hand-proof.md, "Format 4"): one JSON file a player checks offline.

``{"type": "fairdeck-hand-proof", "format": 4, "deck", "hand_id", "codeal": {...}}`` where
``codeal`` is the object of docs/codealing-spec.md section 11 plus the co-dealers' identity
signatures (section 5.5). Read strictly (fairness spec section 7.1: no duplicate names, exactly
these names, lower-case hex, integers without fraction or sign). ``verify`` checks the identity
signatures against the keys the **user** pins, never keys read from the file, then spec section
10 whole; it raises ``CodealError`` naming the step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import V
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.identity import key_statement, shuffle_statement, verify_identity
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.verify import CodealHand, DealtPosition, verify_hand
from fairdeck.core.cards import Card, CardError
from fairdeck.core.decks import DeckSpec, DeckSpecError
from fairdeck.core.strictjson import Number, StrictJSONError, loads

TYPE = "fairdeck-hand-proof"
FORMAT = 4
_HEX = re.compile(r"(?:[0-9a-f]{2})+")
_INT = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class CodealerSignatures:
    """A co-dealer's identity signatures over its key and shuffle records."""

    holder: int
    key: bytes
    key_signature: bytes
    shuffle_signature: bytes


@dataclass(frozen=True)
class CodealHandProof:
    hand: CodealHand
    identities: tuple[CodealerSignatures, ...]

    def to_json(self) -> str:
        top = {
            "type": TYPE,
            "format": FORMAT,
            "deck": self.hand.deck,
            "hand_id": self.hand.hand_id,
            "codeal": self.codeal_value(),
        }
        return json.dumps(top, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> CodealHandProof:
        try:
            top = loads(text)
        except StrictJSONError as e:
            raise CodealError("encoding", f"hand proof: {e}") from None
        return cls.from_value(top)

    @classmethod
    def from_value(cls, top: Any) -> CodealHandProof:
        """The proof from its strict JSON value (``fairdeck.log.handproof.read_value``), step encoding."""
        _names(top, {"type", "format", "deck", "hand_id", "codeal"}, "hand proof")
        return cls.read_record(top, FORMAT)[0]

    @classmethod
    def read_record(cls, top: Any, fmt: int) -> tuple[CodealHandProof, tuple[bytes, ...]]:
        """``type``, ``format``, ``deck``, ``hand_id`` and ``codeal`` of a proof of format ``fmt`` (4,
        or 5 whose dealt positions name their seat key: docs/hand-proof.md), step encoding; the
        proof and, in format 5, each dealt position's seat key (empty: a public card)."""
        if top["type"] != TYPE or _int(top["format"], "format") != fmt:
            raise CodealError("encoding", f"want a {TYPE!r} of format {fmt}")
        deck, hand_id = _str(top["deck"], "deck"), _str(top["hand_id"], "hand_id")
        try:
            spec = DeckSpec.parse(deck)
        except DeckSpecError as e:
            raise CodealError("encoding", f"deck: {e}") from None
        c = top["codeal"]
        _names(c, {"version", "keys", "shuffles", "identities", "dealt", "seeds"}, "codeal")
        if c["version"] != V:
            raise CodealError("encoding", f"codeal.version: want {V!r}")
        identities = []
        for i, item in enumerate(_list(c["identities"], "identities")):
            _names(item, {"holder", "key", "key_signature", "shuffle_signature"}, f"identities[{i}]")
            identities.append(
                CodealerSignatures(
                    _int(item["holder"], f"identities[{i}].holder"),
                    _hex(item["key"], f"identities[{i}].key"),
                    _hex(item["key_signature"], f"identities[{i}].key_signature"),
                    _hex(item["shuffle_signature"], f"identities[{i}].shuffle_signature"),
                )
            )
        dealt, seat_keys, shoe = [], [], spec.name.startswith("shoe")
        names = {"position", "card", "shares"} | ({"seat_key"} if fmt > FORMAT else set())
        for i, item in enumerate(_list(c["dealt"], "dealt")):
            _names(item, names, f"dealt[{i}]")
            code = _str(item["card"], f"dealt[{i}].card")
            try:
                card = Card.parse(code).id
            except CardError as e:
                raise CodealError("encoding", f"dealt[{i}].card: {e}") from None
            # The deck's own code only ("As" in a standard deck, "As.1" in a shoe), as to_json writes it.
            if not spec.contains(card) or Card.from_id(card, shoe=shoe).code != code:
                raise CodealError("encoding", f"dealt[{i}].card: not a card of deck {deck!r}")
            shares = tuple(_hex(s, f"dealt[{i}].shares") for s in _list(item["shares"], f"dealt[{i}].shares"))
            dealt.append(DealtPosition(_int(item["position"], f"dealt[{i}].position"), card, shares))
            if "seat_key" in names:
                seat_keys.append(_seat_key(item["seat_key"], f"dealt[{i}].seat_key"))
        seeds = tuple(_hex(s, "seeds") for s in _list(c["seeds"], "seeds"))
        hand = CodealHand(
            deck,
            hand_id,
            tuple(_hex(k, "keys") for k in _list(c["keys"], "keys")),
            tuple(_hex(s, "shuffles") for s in _list(c["shuffles"], "shuffles")),
            tuple(dealt),
            seeds or None,
        )
        return cls(hand, tuple(identities)), tuple(seat_keys)

    def codeal_value(self, seat_keys: Sequence[bytes] | None = None) -> dict[str, Any]:
        """The ``codeal`` object; with ``seat_keys`` (one per dealt position), format 5's."""
        spec = DeckSpec.parse(self.hand.deck)
        shoe = spec.name.startswith("shoe")
        dealt = []
        for i, d in enumerate(self.hand.dealt):
            item: dict[str, Any] = {
                "position": d.position,
                "card": Card.from_id(d.card, shoe=shoe).code,
                "shares": [s.hex() for s in d.shares],
            }
            if seat_keys is not None:
                item["seat_key"] = seat_keys[i].hex()
            dealt.append(item)
        return {
            "version": V,
            "keys": [k.hex() for k in self.hand.keys],
            "shuffles": [s.hex() for s in self.hand.shuffles],
            "identities": [
                {
                    "holder": i.holder,
                    "key": i.key.hex(),
                    "key_signature": i.key_signature.hex(),
                    "shuffle_signature": i.shuffle_signature.hex(),
                }
                for i in self.identities
            ],
            "dealt": dealt,
            "seeds": [s.hex() for s in self.hand.seeds or ()],
        }

    def verify(self, identity_keys: Sequence[bytes]) -> None:
        """Identities (pinned by the caller, one per co-dealer, holder order), then spec section 10."""
        verify_identities(self.hand, self.identities, identity_keys)
        verify_hand(self.hand)


def verify_identities(
    hand: CodealHand, identities: Sequence[CodealerSignatures], identity_keys: Sequence[bytes]
) -> None:
    """Holders 1..K-1 are the co-dealers the caller pins, and each signed its key and shuffle record."""
    # 10.1 encoding and 10.2 key come first: the context needs every key record.
    try:
        spec = DeckSpec.parse(hand.deck)
    except DeckSpecError as e:
        raise CodealError("encoding", f"deck: {e}") from None
    records = [KeyRecord.decode(r, k) for k, r in enumerate(hand.keys)]
    ctx = HandContext(spec, hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    if len(hand.shuffles) != ctx.holders:  # 10.3: a skipped shuffle is a transcript failure
        raise CodealError("transcript", f"want one shuffle per holder in order 0..{ctx.holders - 1}")
    if sorted(i.holder for i in identities) != list(range(1, ctx.holders)):
        raise CodealError("key", "want one identity per co-dealer (holders 1..K-1)")
    if len(identity_keys) != ctx.holders - 1:
        raise CodealError("key", f"the hand has {ctx.holders - 1} co-dealers; pin one identity key for each")
    for identity in sorted(identities, key=lambda i: i.holder):
        k = identity.holder
        if identity.key != identity_keys[k - 1]:
            raise CodealError("key", f"holder {k} is not the pinned co-dealer (another identity key)")
        statement = key_statement(spec, hand.hand_id, k, ctx.holders, hand.keys[k])
        verify_identity(identity.key, statement, identity.key_signature, "key", f"holder {k} key record")
        statement = shuffle_statement(ctx, hand.shuffles[k])
        verify_identity(
            identity.key, statement, identity.shuffle_signature, "shuffle", f"holder {k} shuffle record"
        )


def _names(value: Any, names: set[str], what: str) -> None:
    if not isinstance(value, dict) or set(value) != names:
        raise CodealError("encoding", f"{what}: want an object with exactly {sorted(names)}")


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise CodealError("encoding", f"{what}: want an array")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CodealError("encoding", f"{what}: want a string")
    return value


def _hex(value: Any, what: str) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise CodealError("encoding", f"{what}: want lower-case hex of whole bytes")
    return bytes.fromhex(value)


def _seat_key(value: Any, what: str) -> bytes:
    """A dealt position's seat key in format 5: 32 bytes, or empty for a public card."""
    raw = b"" if value == "" else _hex(value, what)
    if len(raw) not in (0, 32):
        raise CodealError("encoding", f"{what}: a seat key is 32 bytes, or empty for a public card")
    return raw


def _int(value: Any, what: str) -> int:
    if not isinstance(value, Number) or not _INT.fullmatch(value.text):
        raise CodealError("encoding", f"{what}: want a non-negative JSON integer")
    return int(value.text)
