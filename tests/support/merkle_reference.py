"""The RFC 9162 section 2.1 definitions written out naively (recursive, by counting up), and
one log of N leaves built the way the server builds it, with helpers that tamper with proofs:
what the Merkle tests (test_merkle.py, test_merkle_proofs.py) check the package against."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from fairdeck.log.merkle import (
    ProofError,
    leaf_hash,
    stored_hashes_for_append,
    verify_consistency,
    verify_inclusion,
)

# --- a naive, recursive RFC 9162 section 2.1 reference --------------------------------------------


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """Largest power of two smaller than n, by counting up."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = _k(len(leaves))
    return sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = _k(len(leaves))
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


def subproof(m: int, leaves: Sequence[bytes], b: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if b else [mth(leaves)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, leaves[:k], b), mth(leaves[k:])]
    return [*subproof(m - k, leaves[k:], False), mth(leaves[:k])]


def path_shape(m: int, n: int) -> list[bool]:
    """Bottom-up: is the proof hash at this step the right sibling? (Defines the computation.)"""
    if n == 1:
        return []
    k = _k(n)
    return [*path_shape(m, k), True] if m < k else [*path_shape(m - k, n - k), False]


def subproof_shape(m: int, n: int, b: bool = True) -> list[str]:
    """Bottom-up roles of consistency proof hashes: seed, R (new tree only), L (both trees)."""
    if m == n:
        return ["root1"] if b else ["seed"]
    k = _k(n)
    if m <= k:
        return [*subproof_shape(m, k, b), "R"]
    return [*subproof_shape(m - k, n - k, False), "L"]


# --- one log of N leaves, built the way the server builds it ------------------------------------------

N = 300
LEAVES = [leaf_hash(b"entry %d" % i) for i in range(N)]
STORE: list[bytes] = []
COUNTS: list[int] = []  # len(STORE) after each append


def read(indexes: list[int]) -> list[bytes]:
    return [STORE[i] for i in indexes]


for _n, _leaf in enumerate(LEAVES):
    STORE += stored_hashes_for_append(_n, _leaf, read)
    COUNTS.append(len(STORE))


class CountingReader:
    def __init__(self, limit: int) -> None:
        self.calls: list[list[int]] = []
        self.limit = limit

    def __call__(self, indexes: list[int]) -> list[bytes]:
        self.calls.append(list(indexes))
        assert all(0 <= i < self.limit for i in indexes), "read beyond the tree asked for"
        return [STORE[i] for i in indexes]


def flip(h: bytes, bit: int = 0) -> bytes:
    b = bytearray(h)
    b[bit // 8 % len(b)] ^= 1 << (bit % 8)
    return bytes(b)


def rejects_inclusion(i: int, n: int, leaf: bytes, proof: Sequence[bytes], r: bytes) -> bool:
    try:
        verify_inclusion(i, n, leaf, proof, r)
    except ProofError:
        return True
    return False


def rejects_consistency(m: int, n: int, proof: Sequence[bytes], r1: bytes, r2: bytes) -> bool:
    try:
        verify_consistency(m, n, proof, r1, r2)
    except ProofError:
        return True
    return False
