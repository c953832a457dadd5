"""Streaming counts of dealt decks: what the tests need, and nothing per deck.

Each worker turns a chunk of decks, given as card *ranks* (each card's index in the deck spec's
canonical order), into a ``DeckTally``: position and pair counts, histograms of successions and
rising sequences, and one 64-bit hash per deck for the duplicate test, keyed from the run's seed.
The parent adds tallies up. Why the hash collides with probability ``1 / P**2`` exactly:
docs/stats/README.md, "Streaming counts".

>>> import numpy as np
>>> t = DeckTally.empty(3)
>>> t.add(np.array([[0, 1, 2], [2, 1, 0]]), hash_keys("doc", 3))
>>> t.position.tolist(), t.successions.tolist(), t.rising.tolist()
([[1, 0, 1], [0, 2, 0], [1, 0, 1]], [1, 0, 1], [1, 0, 1])
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from itertools import permutations

import numpy as np
import numpy.typing as npt

HASH_PRIME = (1 << 31) - 1
Counts = npt.NDArray[np.int64]
Ranks = npt.NDArray[np.integer]


def hash_keys(seed: str, n: int) -> npt.NDArray[np.int64]:
    """The ``(n, 2)`` keys of the duplicate-test hash for a run's seed."""
    entropy = int.from_bytes(hashlib.sha256(b"fairdeck-stats hash keys\0" + seed.encode()).digest(), "big")
    return np.random.default_rng(entropy).integers(0, HASH_PRIME, size=(n, 2), dtype=np.int64)


def deck_hashes(ranks: Ranks, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """One 64-bit hash per deck (row): ``(h1 << 32) | h2`` with ``h = ranks . key mod P``.

    The dot products are done in float64 (a BLAS matrix product) and are
    exact: a rank is below the deck size n <= 416 < 2**9 and a key below 2**31,
    so every product is below 2**40, and a row's n of them sum to an integer
    below 2**49 < 2**53.
    """
    h = (ranks.astype(np.float64) @ keys.astype(np.float64)).astype(np.int64) % HASH_PRIME
    return (h[:, 0].astype(np.uint64) << np.uint64(32)) | h[:, 1].astype(np.uint64)


@dataclass
class DeckTally:
    """Counts over full decks of ``n`` cards."""

    n: int
    decks: int
    position: Counts
    """``[card, position]``: decks that put that card there."""
    pairs: Counts
    """``[first card, second card]``: the two top cards (hole cards)."""
    successions: Counts
    """``[k]``: decks with ``k`` cards directly followed by their canonical successor."""
    rising: Counts
    """``[r - 1]``: decks with ``r`` rising sequences."""
    hashes: list[npt.NDArray[np.uint64]] = field(default_factory=list)

    @classmethod
    def empty(cls, n: int) -> DeckTally:
        zeros = np.zeros
        return cls(
            n, 0, zeros((n, n), np.int64), zeros((n, n), np.int64), zeros(n, np.int64), zeros(n, np.int64)
        )

    def add(self, ranks: Ranks, keys: npt.NDArray[np.int64]) -> None:
        """Count a chunk of decks: one row per deck, top card first, as card ranks."""
        count, n = ranks.shape
        if n != self.n:
            raise ValueError(f"decks of {n} cards added to a tally of {self.n}")
        small = np.uint8 if n <= 255 else np.uint16
        r = ranks.astype(small)
        cells = n * n
        offsets = np.arange(n, dtype=np.int32)
        self.position += np.bincount((r.astype(np.int32) * n + offsets).ravel(), minlength=cells).reshape(
            n, n
        )
        self.pairs += np.bincount(r[:, 0].astype(np.intp) * n + r[:, 1], minlength=cells).reshape(n, n)
        follows = np.count_nonzero(r[:, 1:] == r[:, :-1] + 1, axis=1)
        self.successions += np.bincount(follows, minlength=n)
        where = np.empty((count, n), dtype=small)  # where[d, card] = position of card in deck d
        rows = (np.arange(count, dtype=np.intp) * n)[:, None]
        where.reshape(-1)[(r + rows).ravel()] = np.tile(offsets.astype(small), count)
        descents = np.count_nonzero(where[:, 1:] < where[:, :-1], axis=1)
        self.rising += np.bincount(descents, minlength=n)
        self.hashes.append(deck_hashes(ranks, keys))
        self.decks += count

    def merge(self, other: DeckTally) -> None:
        if other.n != self.n:
            raise ValueError("tallies of different deck sizes")
        self.decks += other.decks
        self.position += other.position
        self.pairs += other.pairs
        self.successions += other.successions
        self.rising += other.rising
        self.hashes.extend(other.hashes)

    def repeated_decks(self) -> int:
        """Decks whose hash equals an earlier deck's: ``N - distinct``. Frees the hashes."""
        if not self.hashes:
            return 0
        everything = np.concatenate(self.hashes)
        self.hashes = []
        everything.sort()
        return int((everything[1:] == everything[:-1]).sum())


@dataclass
class PermTally:
    """How often each order of an ``n``-card deck (``n`` small) was dealt."""

    n: int
    decks: int
    codes: Counts
    """``[code]`` with ``code`` the deck read as a base-``n`` number (``n**n`` cells)."""

    @classmethod
    def empty(cls, n: int) -> PermTally:
        return cls(n, 0, np.zeros(n**n, np.int64))

    def add(self, ranks: Ranks) -> None:
        count, n = ranks.shape
        if n != self.n:
            raise ValueError(f"decks of {n} cards added to a tally of {self.n}")
        weights = n ** np.arange(n - 1, -1, -1)
        self.codes += np.bincount(ranks.astype(np.intp) @ weights, minlength=n**n)
        self.decks += count

    def merge(self, other: PermTally) -> None:
        self.decks += other.decks
        self.codes += other.codes

    def counts(self) -> Counts:
        """Counts of the ``n!`` orders, in ``itertools.permutations`` order."""
        return self.codes[permutation_codes(self.n)]

    def impossible(self) -> int:
        """Decks that were not an order of the ``n`` cards (always 0 for a shuffle)."""
        return self.decks - int(self.counts().sum())


def permutation_codes(n: int) -> npt.NDArray[np.intp]:
    weights = [n**k for k in range(n - 1, -1, -1)]
    return np.array([sum(c * w for c, w in zip(p, weights, strict=True)) for p in permutations(range(n))])


def permutation_labels(n: int, names: str = "AKQJT98765") -> list[str]:
    """Labels of the orders, like the Spanish post's AKQ (card rank ``i`` is ``names[i]``)."""
    if n > len(names):
        raise ValueError("too many cards to label")
    return ["".join(names[c] for c in p) for p in permutations(range(n))]


def expected_repeats(decks: int, space: float) -> float:
    """Expected repeated decks among ``decks`` uniform draws from ``space`` values (pairs approximation)."""
    return math.comb(decks, 2) / space if decks > 1 else 0.0
