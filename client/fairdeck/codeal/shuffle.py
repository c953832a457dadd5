"""A holder's shuffle, derived from its seed: commitment, permutation, randomness (spec section 6).

The permutation is the fairness spec's Durstenfeld shuffle, computed by ``fairdeck.core``'s own
``derive_deck`` (one derivation in the house, not two) from the holder's seed and one client seed
naming the holder. The re-encryption randomness comes from the same seed under its own label, so a
revealed seed re-derives the whole shuffle. ``check_fresh`` is the freshness rule of section 6.4.

>>> from fairdeck.core.decks import DeckSpec
>>> spec = DeckSpec.parse("short")
>>> sorted(permutation(spec, "h1", 0, bytes(34))) == list(range(36))
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache

from fairdeck.codeal.elgamal import Ciphertext, Deck, V, reencrypt
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import ZERO, Point, Scalar, reduce_wide
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.encoding import lp, u32
from fairdeck.core.seeds import server_seed_length

FAIRNESS_VERSION = "fairdeck-v1"
"""The fairness spec version whose shuffle every holder runs."""


def _head(spec: DeckSpec, hand_id: str, k: int, name: str) -> bytes:
    return lp(f"{V} {name}".encode()) + lp(spec.name.encode()) + lp(hand_id.encode("ascii")) + u32(k)


def check_seed(spec: DeckSpec, seed: object, k: int) -> bytes:
    """The seed, if it has the length of a server seed of this deck (section 6.1)."""
    want = server_seed_length(spec)
    if not isinstance(seed, bytes) or len(seed) != want:
        raise CodealError("seed", f"holder {k}: a seed for deck {spec.name!r} is {want} bytes")
    return seed


def seed_commitment(spec: DeckSpec, hand_id: str, k: int, seed: bytes) -> bytes:
    """``C_k = SHA-256(lp(V " seed") || lp(deck) || lp(hand_id) || u32(k) || lp(S_k))``."""
    return hashlib.sha256(_head(spec, hand_id, k, "seed") + lp(seed)).digest()


def shuffler_client_seed(k: int) -> bytes:
    """The one client seed of holder ``k``'s derivation: ``V " shuffler" || u32(k)``."""
    return f"{V} shuffler".encode() + u32(k)


@cache
def _positions(spec: DeckSpec) -> dict[int, int]:
    return {card: i for i, card in enumerate(spec.card_ids)}


def permutation(spec: DeckSpec, hand_id: str, k: int, seed: bytes) -> tuple[int, ...]:
    """``psi_k``: output position ``i`` takes input position ``psi_k[i]`` (section 6.3)."""
    dealt = derive_deck(spec, hand_id, seed, [shuffler_client_seed(k)], version=FAIRNESS_VERSION)
    positions = _positions(spec)
    return tuple(positions[card] for card in dealt)


def randomness(spec: DeckSpec, hand_id: str, k: int, seed: bytes) -> tuple[Scalar, ...]:
    """``r_k,i`` for ``i = 0..n-1``: SHAKE-256 of the seed and the position, reduced mod L."""
    prefix = _head(spec, hand_id, k, "reencrypt") + lp(seed)
    return tuple(reduce_wide(hashlib.shake_256(prefix + u32(i)).digest(64)) for i in range(spec.size))


def usable_seed(spec: DeckSpec, hand_id: str, k: int, seed: bytes) -> bool:
    """False for the (about ``n * 2^-252``) seeds that derive a zero randomness."""
    return ZERO not in randomness(spec, hand_id, k, seed)


def shuffle_deck(deck: Deck, psi: Sequence[int], rs: Sequence[Scalar], key: Point) -> Deck:
    """``D_{k+1}[i] = ReEnc(D_k[psi[i]], r_i)`` under the joint key (section 6.4)."""
    return tuple(reencrypt(deck[j], key, r) for j, r in zip(psi, rs, strict=True))


def check_fresh(before: Sequence[Ciphertext], after: Sequence[Ciphertext], k: int) -> None:
    """Section 6.4: output ``c1`` pairwise distinct and none equal to an input ``c1``."""
    outputs = {e.c1 for e in after}
    if len(outputs) != len(after):
        raise CodealError("shuffle", f"step {k}: two output ciphertexts share c1 (reused randomness)")
    if not outputs.isdisjoint(e.c1 for e in before):
        raise CodealError("shuffle", f"step {k}: an output c1 equals an input c1 (no re-encryption)")
