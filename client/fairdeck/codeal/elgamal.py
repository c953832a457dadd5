"""ElGamal over ristretto255, card points, proof generators and decks (spec sections 3 and 4).

A ciphertext is ``(c1, c2) = (r*B, M + r*Y)``; a deck is a tuple of ciphertexts, position 0 first,
64 bytes each on the wire. ``decode_deck`` is the only way bytes become a deck, and it rejects the
identity in either half (section 2.1). The initial deck holds the cards of the deck spec in
canonical order with randomness 0, so its ``c1`` are the identity: it is computed, never received.

>>> deck = initial_deck(DeckSpec.parse("short"))
>>> len(deck), deck[0].c1 == IDENTITY, deck[0].c2 == card_point(4)
(36, True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import (
    IDENTITY,
    Point,
    Scalar,
    add,
    decode_point,
    hash_to_point,
    mul,
    mul_base,
)
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u32

V = "fairdeck-codeal-v1"
"""The version of docs/codealing-spec.md; every label of every hash starts with it."""
DST_CARD = b"fairdeck-codeal-v1-card-ristretto255_XMD:SHA-512_R255MAP_RO_"
DST_GEN = b"fairdeck-codeal-v1-generator-ristretto255_XMD:SHA-512_R255MAP_RO_"
CIPHERTEXT_BYTES = 64


class Ciphertext(NamedTuple):
    """An ElGamal ciphertext: ``c1 = r*B``, ``c2 = M + r*Y``."""

    c1: Point
    c2: Point

    def encode(self) -> bytes:
        return self.c1 + self.c2


Deck = tuple[Ciphertext, ...]


@cache
def card_point(card_id: int) -> Point:
    """``P_c = H2P(u32(c), DST_card)``: the public point of card id ``c`` (section 3)."""
    return hash_to_point(u32(card_id), DST_CARD)


@cache
def generators(n: int) -> tuple[Point, ...]:
    """``G_0 .. G_n``: ``h`` then ``h_1 .. h_n`` of the proof of shuffle (section 3)."""
    return tuple(hash_to_point(u32(j), DST_GEN) for j in range(n + 1))


@cache
def card_points(spec: DeckSpec) -> dict[Point, int]:
    """Card point to card id, for the cards of one deck spec (to open a decrypted point)."""
    return {card_point(c): c for c in spec.card_ids}


@cache
def initial_deck(spec: DeckSpec) -> Deck:
    """``D_0``: each card of the canonical order under randomness 0 (section 4.3)."""
    return tuple(Ciphertext(IDENTITY, card_point(c)) for c in spec.card_ids)


def encrypt(point: Point, key: Point, r: Scalar) -> Ciphertext:
    return Ciphertext(mul_base(r), add(point, mul(r, key)))


def reencrypt(e: Ciphertext, key: Point, r: Scalar) -> Ciphertext:
    """The same plaintext under fresh randomness ``r``."""
    return Ciphertext(add(e.c1, mul_base(r)), add(e.c2, mul(r, key)))


def encode_deck(deck: Sequence[Ciphertext]) -> bytes:
    return b"".join(e.c1 + e.c2 for e in deck)


def decode_deck(data: object, n: int, what: str) -> Deck:
    """``n`` ciphertexts from exactly ``64 n`` bytes, every point strictly decoded."""
    if not isinstance(data, bytes) or len(data) != CIPHERTEXT_BYTES * n:
        raise CodealError("encoding", f"{what}: a deck of {n} cards is {CIPHERTEXT_BYTES * n} bytes")
    return tuple(
        Ciphertext(
            decode_point(data[i : i + 32], f"{what} position {i // 64} c1"),
            decode_point(data[i + 32 : i + 64], f"{what} position {i // 64} c2"),
        )
        for i in range(0, len(data), CIPHERTEXT_BYTES)
    )
