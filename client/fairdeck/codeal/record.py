"""The shuffle record: a holder's output deck, its proof of shuffle and its signature (section 6.5).

``u32(k) || D_{k+1} || proof || T || s``. The proof of shuffle shows the output is a permutation
and re-encryption of the input, but not who made it: a dealer could shuffle twice itself and pass
the second shuffle off as the co-dealer's, and then know the whole order. So holder ``k`` signs
its record (a Schnorr signature under its key ``Y_k``, over the hand context and both decks and
the proof), and only holder ``k`` can.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairdeck.codeal.context import HandContext, hs, label
from fairdeck.codeal.elgamal import Deck, decode_deck, encode_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import (
    Point,
    Random,
    Scalar,
    add,
    decode_point,
    decode_scalar,
    mul,
    mul_base,
    random_scalar,
    s_add,
    s_mul,
)
from fairdeck.codeal.proof import ShuffleProof, proof_bytes
from fairdeck.core.encoding import lp, u32


def record_bytes(n: int) -> int:
    """``4 + 64 n + 32 (5 n + 9) + 64``: 12 004 bytes for 52 cards."""
    return 4 + 64 * n + proof_bytes(n) + 64


@dataclass(frozen=True)
class ShuffleRecord:
    """Holder ``k``'s shuffle: the deck it output, the proof, and its signature ``(T, s)``."""

    k: int
    deck: Deck
    proof: ShuffleProof
    t: Point
    s: Scalar

    def encode(self) -> bytes:
        return u32(self.k) + encode_deck(self.deck) + self.proof.encode() + self.t + self.s

    @classmethod
    def decode(cls, data: object, n: int, i: int) -> ShuffleRecord:
        if not isinstance(data, bytes) or len(data) != record_bytes(n):
            raise CodealError("encoding", f"shuffle record {i}: {record_bytes(n)} bytes for {n} cards")
        k = int.from_bytes(data[:4], "big")
        end = 4 + 64 * n + proof_bytes(n)
        return cls(
            k,
            decode_deck(data[4 : 4 + 64 * n], n, f"shuffle record {i} deck"),
            ShuffleProof.decode(data[4 + 64 * n : end], n, k),
            decode_point(data[end : end + 32], f"shuffle record {i} T"),
            decode_scalar(data[end + 32 :], f"shuffle record {i} s"),
        )


def _challenge(ctx: HandContext, k: int, before: Deck, after: Deck, proof: ShuffleProof, t: Point) -> Scalar:
    return hs(
        label("shuffle signature")
        + ctx.encoded
        + u32(k)
        + lp(encode_deck(before))
        + lp(encode_deck(after))
        + lp(proof.encode())
        + lp(t)
    )


def sign_shuffle(
    ctx: HandContext, k: int, before: Deck, after: Deck, proof: ShuffleProof, x: Scalar, random: Random
) -> ShuffleRecord:
    """Holder ``k``'s signed record of its shuffle ``before -> after``."""
    w = random_scalar(random)
    t = mul_base(w)
    return ShuffleRecord(k, after, proof, t, s_add(w, s_mul(_challenge(ctx, k, before, after, proof, t), x)))


def verify_signature(ctx: HandContext, before: Deck, record: ShuffleRecord) -> None:
    """Step 10.4: ``s * B == T + e * Y_k``: the record is holder ``k``'s own."""
    k = record.k
    e = _challenge(ctx, k, before, record.deck, record.proof, record.t)
    if mul_base(record.s) != add(record.t, mul(e, ctx.keys[k])):
        raise CodealError("shuffle", f"step {k}: the shuffle record is not signed by holder {k}")
