"""Who a co-dealer is: its long-term Ed25519 identity signs its key and shuffle records (section 5.5).

The key record proves possession of a per-hand key, not whose key it is; a dealer that made up a
"co-dealer" itself would hold every secret. So each co-dealer signs, with the identity key the
operator and the verifier pin, the statement of its key record (bound to the deck, the hand id,
its index and the number of holders) and of its shuffle record (bound to the whole hand context).
``verify_identity`` raises CodealError("key") or ("shuffle") naming the holder.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fairdeck.codeal.context import HandContext, head, label
from fairdeck.codeal.errors import CodealError
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32

IDENTITY_KEY_BYTES = 32
SIGNATURE_BYTES = 64


def key_statement(spec: DeckSpec, hand_id: str, k: int, holders: int, key_record: bytes) -> bytes:
    """``lp(V " identity key record") || lp(deck) || lp(hand_id) || u32(k) || u32(K) || key record``."""
    return label("identity key record") + head(spec, hand_id) + u32(k) + u32(holders) + key_record


def shuffle_statement(ctx: HandContext, shuffle_record: bytes) -> bytes:
    """``lp(V " identity shuffle record") || ctx || lp(shuffle record)``."""
    return label("identity shuffle record") + ctx.encoded + lp(shuffle_record)


def sign(identity: Ed25519PrivateKey, statement: bytes) -> bytes:
    return identity.sign(statement)


def verify_identity(identity_key: bytes, statement: bytes, signature: bytes, step: str, what: str) -> None:
    """The signature is ``identity_key``'s over ``statement``, or CodealError(step)."""
    if len(identity_key) != IDENTITY_KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        raise CodealError("encoding", f"{what}: an identity key is 32 bytes and a signature 64")
    try:
        Ed25519PublicKey.from_public_bytes(identity_key).verify(signature, statement)
    except (InvalidSignature, ValueError):
        raise CodealError(step, f"{what}: not signed by the pinned identity key") from None
