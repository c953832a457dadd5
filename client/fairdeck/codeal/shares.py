"""Decryption shares with Chaum-Pedersen (DLEQ) proofs, and opening a card (spec section 8).

Holder ``k``'s share of the ciphertext ``(c1, c2)`` at final position ``p`` is ``D = x_k * c1``
with a proof that ``log_B Y_k = log_c1 D``, whose challenge hashes the hand context, the position,
the holder, the ciphertext, ``D`` and both commitments. A share is ``D || A || A' || z``
(128 bytes). ``open_card`` subtracts every holder's ``D`` from ``c2`` and names the card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairdeck.codeal.context import HandContext, hs, label
from fairdeck.codeal.elgamal import Ciphertext, card_points
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
    sub,
)
from fairdeck.core.encoding import lp, u32

SHARE_BYTES = 128


@dataclass(frozen=True)
class Share:
    """One holder's decryption share of one ciphertext, with its DLEQ proof."""

    d: Point
    a: Point
    a_prime: Point
    z: Scalar

    def encode(self) -> bytes:
        return self.d + self.a + self.a_prime + self.z

    @classmethod
    def decode(cls, data: object, what: str) -> Share:
        if not isinstance(data, bytes) or len(data) != SHARE_BYTES:
            raise CodealError("encoding", f"{what}: a share is {SHARE_BYTES} bytes")
        return cls(
            decode_point(data[:32], f"{what} D"),
            decode_point(data[32:64], f"{what} A"),
            decode_point(data[64:96], f"{what} A'"),
            decode_scalar(data[96:], f"{what} z"),
        )


def _challenge(ctx: HandContext, p: int, k: int, e: Ciphertext, d: Point, a: Point, a_prime: Point) -> Scalar:
    return hs(label("share") + ctx.encoded + u32(p) + u32(k) + lp(e.c1 + e.c2) + lp(d) + lp(a) + lp(a_prime))


def make_share(ctx: HandContext, p: int, k: int, x: Scalar, e: Ciphertext, random: Random) -> Share:
    """Holder ``k``'s share of ``e``, the final deck's ciphertext at position ``p``."""
    d = mul(x, e.c1)
    w = random_scalar(random)
    a, a_prime = mul_base(w), mul(w, e.c1)
    return Share(d, a, a_prime, s_add(w, s_mul(_challenge(ctx, p, k, e, d, a, a_prime), x)))


def verify_share(ctx: HandContext, p: int, k: int, e: Ciphertext, share: Share) -> None:
    """Step 10.5: ``z*B == A + e*Y_k`` and ``z*c1 == A' + e*D``."""
    if not 0 <= k < ctx.holders:
        raise CodealError("share", f"position {p}: no holder {k}")
    c = _challenge(ctx, p, k, e, share.d, share.a, share.a_prime)
    if mul_base(share.z) != add(share.a, mul(c, ctx.keys[k])):
        raise CodealError("share", f"position {p}, holder {k}: the DLEQ proof fails against the key")
    if mul(share.z, e.c1) != add(share.a_prime, mul(c, share.d)):
        raise CodealError("share", f"position {p}, holder {k}: the DLEQ proof fails against the ciphertext")


def open_card(ctx: HandContext, p: int, e: Ciphertext, shares: Sequence[Share]) -> int:
    """The card id ``e`` holds, from one verified share per holder (step 10.6)."""
    if len(shares) != ctx.holders:
        raise CodealError("transcript", f"position {p}: {len(shares)} shares for {ctx.holders} holders")
    point = e.c2
    for share in shares:
        point = sub(point, share.d)
    card = card_points(ctx.deck).get(point)
    if card is None:
        raise CodealError("open", f"position {p}: the shares open to no card of deck {ctx.deck.name!r}")
    return card
