"""Key holders: fresh keys and seeds, and the key record with its proof of possession (section 5).

A key record is ``Y_k || T_k || s_k || C_k`` (128 bytes): the public key, a Schnorr proof that the
holder knows its secret (bound to the deck, the hand id, the holder's index and its seed
commitment), and the seed commitment. Without the proof a holder could publish a rogue key that
cancels the others' and read every card alone. ``HolderSecrets`` never prints its secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairdeck.codeal.context import head, hs, label
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import (
    ZERO,
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
from fairdeck.codeal.shuffle import check_seed, seed_commitment, usable_seed
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32
from fairdeck.core.seeds import server_seed_length

KEY_RECORD_BYTES = 128


@dataclass(frozen=True)
class KeyRecord:
    """What holder ``k`` publishes when the hand opens."""

    key: Point
    t: Point
    s: Scalar
    commitment: bytes

    def encode(self) -> bytes:
        return self.key + self.t + self.s + self.commitment

    @classmethod
    def decode(cls, data: object, k: int) -> KeyRecord:
        if not isinstance(data, bytes) or len(data) != KEY_RECORD_BYTES:
            raise CodealError("encoding", f"key record {k}: {KEY_RECORD_BYTES} bytes")
        return cls(
            decode_point(data[:32], f"key record {k} Y"),
            decode_point(data[32:64], f"key record {k} T"),
            decode_scalar(data[64:96], f"key record {k} s"),
            data[96:],
        )


@dataclass(frozen=True)
class HolderSecrets:
    """Holder ``k``'s secrets for one hand: its ElGamal key and its shuffle seed."""

    k: int
    x: Scalar = field(repr=False)
    seed: bytes = field(repr=False)
    record: KeyRecord


def _pop_challenge(spec: DeckSpec, hand_id: str, k: int, key: Point, commitment: bytes, t: Point) -> Scalar:
    return hs(label("key") + head(spec, hand_id) + u32(k) + lp(key) + lp(commitment) + lp(t))


def new_holder(spec: DeckSpec, hand_id: str, k: int, random: Random) -> HolderSecrets:
    """Draw holder ``k``'s key and seed from ``random`` and make its key record."""
    x = ZERO
    while x == ZERO:
        x = random_scalar(random)
    seed = random(server_seed_length(spec))
    while not usable_seed(spec, hand_id, k, seed):  # pragma: no cover - probability n * 2^-252
        seed = random(server_seed_length(spec))
    return holder_from(spec, hand_id, k, x, seed, random)


def holder_from(
    spec: DeckSpec, hand_id: str, k: int, x: Scalar, seed: bytes, random: Random
) -> HolderSecrets:
    """The key record of a holder whose secret key and seed are given."""
    check_seed(spec, seed, k)
    key = mul_base(x)
    commitment = seed_commitment(spec, hand_id, k, seed)
    w = random_scalar(random)
    t = mul_base(w)
    s = s_add(w, s_mul(_pop_challenge(spec, hand_id, k, key, commitment, t), x))
    return HolderSecrets(k, x, seed, KeyRecord(key, t, s, commitment))


def verify_key_record(spec: DeckSpec, hand_id: str, k: int, record: KeyRecord) -> None:
    """Step 10.2: ``s * B == T + e * Y`` with ``e`` over the whole announcement."""
    e = _pop_challenge(spec, hand_id, k, record.key, record.commitment, record.t)
    if mul_base(record.s) != add(record.t, mul(e, record.key)):
        raise CodealError("key", f"holder {k}: the proof of possession of its key does not verify")
