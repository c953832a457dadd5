"""Sealing a share to a seat's X25519 key, and opening it on the seat's device (spec section 9).

``sealed = epk || ChaCha20-Poly1305(HKDF-SHA256(X25519(eph, seat_pk), info), 0^12, share, info)``
with ``info`` binding the version, deck, hand id, position, holder, ``epk`` and the seat's key, so
a sealed share cannot be moved to another hand, position, holder or seat. The ephemeral key is
fresh per seal, so the fixed nonce is used once per key. Opening never returns an unverified
share: the caller verifies it with ``shares.verify_share`` before combining. The seat's release
of a seal (section 9.3) is ``HKDF-SHA256(X25519(eph, seat_pk), release info)``, ``release info``
the seal's info under the label "seal release": only the sealer (``eph``) and the seat
(``seat_sk``) can compute it, never whoever sees the sealed bytes and the seat key.
"""

from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fairdeck.codeal.context import head, label
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import Random
from fairdeck.codeal.shares import SHARE_BYTES
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u32

SEALED_BYTES = 32 + SHARE_BYTES + 16
_NONCE = bytes(12)


def _info(spec: DeckSpec, hand_id: str, p: int, k: int, epk: bytes, seat_pk: bytes) -> bytes:
    return label("seal") + head(spec, hand_id) + u32(p) + u32(k) + epk + seat_pk


def _release_info(spec: DeckSpec, hand_id: str, p: int, k: int, epk: bytes, seat_pk: bytes) -> bytes:
    return label("seal release") + head(spec, hand_id) + u32(p) + u32(k) + epk + seat_pk


def _key(shared: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


def _exchange(secret: X25519PrivateKey, public: bytes) -> bytes:
    try:
        return secret.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:  # a low-order public key: the shared secret is all zeros
        raise CodealError("seal", "the X25519 exchange gives zero: a low-order key") from None


P25519 = 2**255 - 19


def canonical_seat_key(seat_pk: bytes) -> bool:
    """Whether ``seat_pk`` is the one encoding of its X25519 key: u below 2^255 - 19, top bit
    clear (RFC 7748 masks the bit and reduces u, so other byte strings name the same key)."""
    return len(seat_pk) == 32 and int.from_bytes(seat_pk, "little") < P25519


def check_seat_key(seat_pk: bytes) -> None:
    """CodealError("seal") if ``seat_pk`` is refused as a seat key (section 9.1, rule 2): a
    low-order key, or one that is not canonical; found before anything is asked of a co-dealer."""
    if not canonical_seat_key(seat_pk):
        raise CodealError("seal", "a non-canonical X25519 key")
    _exchange(X25519PrivateKey.generate(), seat_pk)


def seat_public_key(seat_secret: bytes) -> bytes:
    """The 32-byte X25519 public key of a seat's 32-byte secret."""
    return X25519PrivateKey.from_private_bytes(seat_secret).public_key().public_bytes_raw()


def seal_share(
    spec: DeckSpec, hand_id: str, p: int, k: int, share: bytes, seat_pk: bytes, random: Random
) -> bytes:
    """Holder ``k``'s share for position ``p``, sealed to the seat whose X25519 key is ``seat_pk``."""
    return seal_share_released(spec, hand_id, p, k, share, seat_pk, random)[0]


def seal_share_released(
    spec: DeckSpec, hand_id: str, p: int, k: int, share: bytes, seat_pk: bytes, random: Random
) -> tuple[bytes, bytes]:
    """(sealed share, the seat's release token of it): ``seal_share``, and the 32-byte token
    (section 9.3) the seat's device derives again with ``seat_release``; a secret until used."""
    if len(share) != SHARE_BYTES or len(seat_pk) != 32:
        raise CodealError("encoding", "seal: a share is 128 bytes and a seat key 32")
    eph = X25519PrivateKey.from_private_bytes(random(32))
    epk = eph.public_key().public_bytes_raw()
    info = _info(spec, hand_id, p, k, epk, seat_pk)
    shared = _exchange(eph, seat_pk)
    sealed = epk + ChaCha20Poly1305(_key(shared, info)).encrypt(_NONCE, share, info)
    return sealed, _key(shared, _release_info(spec, hand_id, p, k, epk, seat_pk))


def seat_release(spec: DeckSpec, hand_id: str, p: int, k: int, sealed: bytes, seat_secret: bytes) -> bytes:
    """The seat's release token of holder ``k``'s seal of position ``p`` (section 9.3), after
    checking that ``sealed`` opens with this seat's key there (CodealError as ``open_sealed_share``)."""
    open_sealed_share(spec, hand_id, p, k, sealed, seat_secret)
    return derive_release(spec, hand_id, p, k, sealed[:32], seat_secret)


def derive_release(spec: DeckSpec, hand_id: str, p: int, k: int, epk: bytes, seat_secret: bytes) -> bytes:
    """Section 9.3's formula from the seat's side, for ``epk`` as given, with no check that a seal
    opens (the vectors show that a wrong key, position, holder or hand gives another token)."""
    secret = X25519PrivateKey.from_private_bytes(seat_secret)
    info = _release_info(spec, hand_id, p, k, epk, secret.public_key().public_bytes_raw())
    return _key(_exchange(secret, epk), info)


def release_digest(token: bytes) -> bytes:
    """SHA-256 of a release token: what the co-dealer keeps of it (section 9.3)."""
    return hashlib.sha256(token).digest()


def open_sealed_share(
    spec: DeckSpec, hand_id: str, p: int, k: int, sealed: bytes, seat_secret: bytes
) -> bytes:
    """The share inside ``sealed``, or CodealError("seal") if it was not sealed for this seat and place."""
    if not isinstance(sealed, bytes) or len(sealed) != SEALED_BYTES:
        raise CodealError("encoding", f"seal: a sealed share is {SEALED_BYTES} bytes")
    secret = X25519PrivateKey.from_private_bytes(seat_secret)
    epk = sealed[:32]
    info = _info(spec, hand_id, p, k, epk, secret.public_key().public_bytes_raw())
    key = _key(_exchange(secret, epk), info)
    try:
        return ChaCha20Poly1305(key).decrypt(_NONCE, sealed[32:], info)
    except InvalidTag:
        raise CodealError("seal", f"position {p}, holder {k}: the sealed share does not open") from None
