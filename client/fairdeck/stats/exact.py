"""Exact distributions of permutation statistics under a uniform shuffle.

Rising sequences (Eulerian numbers) and successions, computed from their combinatorial
definitions in Python integers, no floating point until the final division; tests/stats checks
them against enumeration. The definitions and why these statistics: docs/stats/README.md,
"Exact distributions".

>>> eulerian_row(4)
(1, 11, 11, 1)
>>> succession_counts(3)
(3, 2, 1)
>>> sum(succession_counts(52)) == math.factorial(52)
True
"""

from __future__ import annotations

import math
from functools import cache


@cache
def eulerian_row(n: int) -> tuple[int, ...]:
    """``A(n, k)`` for ``k`` in ``0..n-1``: permutations of ``n`` with ``k`` descents."""
    if n < 1:
        raise ValueError("n must be at least 1")
    row = [1]
    for m in range(2, n + 1):
        row = [
            (k + 1) * (row[k] if k < len(row) else 0) + (m - k) * (row[k - 1] if k >= 1 else 0)
            for k in range(m)
        ]
    return tuple(row)


def rising_sequence_probabilities(n: int) -> tuple[float, ...]:
    """``P(R = r)`` for ``r`` in ``1..n`` (index ``r - 1``) for a uniform ``n``-card deck."""
    total = math.factorial(n)
    return tuple(a / total for a in eulerian_row(n))


def riffle_rising_sequence_probabilities(n: int, shuffles: int) -> tuple[float, ...]:
    """``P(R = r)`` after ``shuffles`` Gilbert-Shannon-Reeds riffles of a sorted deck.

    A permutation with ``r`` rising sequences has probability
    ``C(2**k + n - r, n) / 2**(k n)`` after ``k`` riffles (Bayer-Diaconis), and
    ``A(n, r - 1)`` permutations have ``r``.
    """
    a = 1 << shuffles
    total = a**n
    return tuple(
        eulerian_row(n)[r - 1] * math.comb(a + n - r, n) / total if a + n - r >= n else 0.0
        for r in range(1, n + 1)
    )


@cache
def _no_succession(m: int) -> int:
    if m <= 2:
        return 1
    a, b = 1, 1  # S(1), S(2)
    for j in range(3, m + 1):
        a, b = b, (j - 1) * b + (j - 2) * a
    return b


def succession_counts(n: int) -> tuple[int, ...]:
    """Permutations of ``n`` with exactly ``k`` successions, ``k`` in ``0..n-1``."""
    if n < 1:
        raise ValueError("n must be at least 1")
    return tuple(math.comb(n - 1, k) * _no_succession(n - k) for k in range(n))


def succession_probabilities(n: int) -> tuple[float, ...]:
    """``P(successions = k)`` for ``k`` in ``0..n-1`` for a uniform ``n``-card deck."""
    total = math.factorial(n)
    return tuple(c / total for c in succession_counts(n))
