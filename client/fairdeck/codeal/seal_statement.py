"""Who a share was sealed to: the co-dealer's signed seal statement, checked on the seat's device
(docs/codealing-spec.md sections 9.1 and 9.2).

The dealer relays the seat's X25519 key to the co-dealer, so it could hand over its own key and
open the co-dealer's share. Each co-dealer therefore signs, with its pinned identity key, which key
it sealed each position to (and the SHA-256 of the sealed bytes), and gives each position once.
``open_seat_card`` refuses, before any share is opened, unless every co-dealer's statement for the
position verifies under its pinned key and names this device's own key: a substituted key leaves
the device a signed statement naming a foreign key (transferable evidence) or none at all.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fairdeck.codeal.context import HandContext, label
from fairdeck.codeal.elgamal import Deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.seal import open_sealed_share, seat_public_key
from fairdeck.codeal.shares import Share, open_card, verify_share
from fairdeck.core.encoding import u32


@dataclass(frozen=True)
class SealStatement:
    """Co-dealer ``holder``'s signed word that it sealed a position to ``seat_key``."""

    holder: int
    seat_key: bytes
    """The X25519 key the co-dealer sealed to, 32 bytes."""
    sealed_sha256: bytes
    """SHA-256 of the 176 sealed bytes it made."""
    signature: bytes
    """Ed25519, by the co-dealer's identity key, over ``seal_statement``."""


def seal_statement(ctx: HandContext, p: int, k: int, seat_key: bytes, sealed_sha256: bytes) -> bytes:
    """``lp(V " identity seal") || ctx || u32(p) || u32(k) || seat_pk || SHA-256(sealed)`` (9.1)."""
    return label("identity seal") + ctx.encoded + u32(p) + u32(k) + seat_key + sealed_sha256


def sign_seal(
    identity: Ed25519PrivateKey, ctx: HandContext, p: int, k: int, seat_key: bytes, sealed: bytes
) -> SealStatement:
    """Holder ``k``'s statement that it sealed ``sealed`` (position ``p``) to ``seat_key``."""
    digest = hashlib.sha256(sealed).digest()
    return SealStatement(k, seat_key, digest, identity.sign(seal_statement(ctx, p, k, seat_key, digest)))


def verifies(identity_key: bytes, statement: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``identity_key``'s over ``statement`` (Ed25519, strict)."""
    try:
        Ed25519PublicKey.from_public_bytes(identity_key).verify(signature, statement)
    except (InvalidSignature, ValueError):
        return False
    return True


def check_seals(
    ctx: HandContext,
    p: int,
    sealed_shares: Sequence[bytes],
    seals: Sequence[SealStatement],
    seat_key: bytes,
    identity_keys: Sequence[bytes],
) -> None:
    """Section 9.2: every co-dealer's statement for position ``p`` is signed by its pinned key, names
    ``seat_key`` and the sealed bytes received; else CodealError naming the position."""
    holders = ctx.holders
    if len(identity_keys) != holders - 1 or any(len(key) != 32 for key in identity_keys):
        raise CodealError(
            "encoding", f"pinned identity keys: want {holders - 1} of 32 bytes, holders 1..{holders - 1}"
        )
    if len(sealed_shares) != holders:
        raise CodealError("transcript", f"position {p}: {len(sealed_shares)} shares for {holders} holders")
    if [s.holder for s in seals] != list(range(1, holders)):
        raise CodealError(
            "seal", f"position {p}: want one seal statement per co-dealer, holders 1..{holders - 1} in order"
        )
    for s in seals:
        k = s.holder
        if len(s.seat_key) != 32 or len(s.sealed_sha256) != 32 or len(s.signature) != 64:
            raise CodealError(
                "encoding", f"position {p} seal {k}: a seat key is 32 bytes, a digest 32 and a signature 64"
            )
        statement = seal_statement(ctx, p, k, s.seat_key, s.sealed_sha256)
        if not verifies(identity_keys[k - 1], statement, s.signature):
            raise CodealError(
                "seal",
                f"position {p}: co-dealer {k}'s seal statement does not verify under its pinned identity key",
            )
        if not hmac.compare_digest(s.seat_key, seat_key):
            raise CodealError(
                "seal",
                f"position {p} was sealed by co-dealer {k} to another key: "
                "the dealer may have read this card",
            )
        if not hmac.compare_digest(s.sealed_sha256, hashlib.sha256(sealed_shares[k]).digest()):
            raise CodealError("seal", f"position {p}: co-dealer {k}'s sealed share is not the one it signed")


def open_seat_card(
    ctx: HandContext,
    final: Deck,
    p: int,
    sealed_shares: Sequence[bytes],
    seals: Sequence[SealStatement],
    seat_secret: bytes,
    identity_keys: Sequence[bytes],
) -> int:
    """A hole card on the seat's device: the seal statements (9.2), then every holder's sealed share
    opened (9), each decoded and verified (10.5), and combined (10.6), in that order (as the
    JavaScript seat does). The card id, or CodealError naming the step."""
    if not 0 <= p < len(final):
        raise CodealError("transcript", "dealt positions must be distinct and in 0..n-1")
    check_seals(ctx, p, sealed_shares, seals, seat_public_key(seat_secret), identity_keys)
    opened = [
        open_sealed_share(ctx.deck, ctx.hand_id, p, k, s, seat_secret) for k, s in enumerate(sealed_shares)
    ]
    shares = [Share.decode(data, f"position {p} share {k}") for k, data in enumerate(opened)]
    for k, share in enumerate(shares):
        verify_share(ctx, p, k, final[p], share)
    return open_card(ctx, p, final[p], shares)
