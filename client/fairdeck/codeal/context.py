"""The hand context and the Fiat-Shamir hashes over it (spec sections 1, 5.3 and 5.4).

``ctx = lp(V) || lp(deck) || lp(hand_id) || u32(K) || Y_0 .. Y_{K-1} || C_0 .. C_{K-1}`` is hashed
whole by every challenge of the shuffle proofs and the shares, so a proof made for another hand,
deck, key set or seed commitment cannot verify here. ``hs`` is the spec's ``Hs``: SHA-512 of the
input, 64 bytes read little-endian and reduced mod L by libsodium.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from fairdeck.codeal.elgamal import V
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import IDENTITY, Point, Scalar, add, reduce_wide
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32
from fairdeck.core.seeds import SeedError, check_hand_id

MIN_HOLDERS = 2
MAX_HOLDERS = 16


def label(name: str) -> bytes:
    """``lp(V || " " || name)``: the first field of every hash input."""
    return lp(f"{V} {name}".encode("ascii"))


def hs(data: bytes) -> Scalar:
    """``Hs(x) = LE(SHA-512(x)) mod L``."""
    return reduce_wide(hashlib.sha512(data).digest())


def head(deck: DeckSpec, hand_id: str) -> bytes:
    """``lp(deck) || lp(hand_id)``, after checking the hand id (fairness spec section 3.1)."""
    try:
        check_hand_id(hand_id)
    except SeedError as error:
        raise CodealError("encoding", f"hand id: {error}") from None
    return lp(deck.name.encode("ascii")) + lp(hand_id.encode("ascii"))


@dataclass(frozen=True)
class HandContext:
    """The public statement every proof of a hand is bound to."""

    deck: DeckSpec
    hand_id: str
    keys: tuple[Point, ...]
    """Y_0 .. Y_{K-1}, holder order (already decoded and checked, section 5.2)."""
    commitments: tuple[bytes, ...]
    """C_0 .. C_{K-1}, the seed commitments (32 bytes each)."""
    encoded: bytes = field(init=False, repr=False)
    joint_key: Point = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not MIN_HOLDERS <= len(self.keys) <= MAX_HOLDERS or len(self.commitments) != len(self.keys):
            raise CodealError("encoding", f"a hand has {MIN_HOLDERS} to {MAX_HOLDERS} key holders")
        if any(len(c) != 32 for c in self.commitments):
            raise CodealError("encoding", "a seed commitment is 32 bytes")
        encoded = (
            lp(V.encode())
            + head(self.deck, self.hand_id)
            + u32(len(self.keys))
            + b"".join(self.keys)
            + b"".join(self.commitments)
        )
        object.__setattr__(self, "encoded", encoded)
        if len(set(self.keys)) != len(self.keys):
            raise CodealError("key", "two key holders have the same key")
        joint = IDENTITY
        for key in self.keys:
            joint = add(joint, key)
        if joint == IDENTITY:
            raise CodealError("key", "the joint key is the identity")
        object.__setattr__(self, "joint_key", joint)

    @property
    def holders(self) -> int:
        return len(self.keys)
