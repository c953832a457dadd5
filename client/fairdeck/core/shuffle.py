"""The unbiased shuffle: a uniform index below n! and the Durstenfeld swap loop.

Spec sections 4 and 5: a uniform integer ``r`` in ``[0, n!)`` is drawn by rejection (never
modulo of a raw value, never floats), and its mixed-radix digits are the successive ``j`` of the
Durstenfeld shuffle, so the result is exactly the Fisher-Yates distribution.
``durstenfeld_reference`` is the normative loop, written to be read; ``shuffle_by_index``
computes the same result with straight-line code generated once per deck size, and tests check
the two agree (why, and what it costs: docs/fairness-spec.md, appendix A.2).

>>> durstenfeld_reference(["a", "b", "c"], 3)
('c', 'b', 'a')
>>> shuffle_by_index(["a", "b", "c"], 3)
('c', 'b', 'a')
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

# Inner digit arithmetic stays on single-digit CPython ints (below 2**30).
_SMALL = 1 << 30


@cache
def factorial(n: int) -> int:
    """n!, cached: the derivation asks for the same few sizes all day."""
    return math.factorial(n)


@cache
def index_bits(n: int) -> int:
    """B, the bit length of ``n! - 1``: how many stream bits one attempt takes."""
    return (factorial(n) - 1).bit_length()


@dataclass(frozen=True, slots=True)
class Shuffler:
    """The spec's sampling and shuffle for one deck size, with its constants."""

    size: int
    limit: int
    """n!: indices are uniform in ``[0, limit)``."""
    mask: int
    """The low B bits (B = bit length of ``n! - 1``)."""
    width: int
    """Bytes read per attempt: ceil(B / 8)."""
    permute: Callable[[int, list[Any]], tuple[Any, ...]]
    """Durstenfeld's loop driven by an index; consumes the list it is given."""

    def uniform_index(self, read: Callable[[int], bytes]) -> int:
        """A uniform integer in ``[0, n!)`` by rejection (spec section 4).

        Each attempt reads ``ceil(B / 8)`` bytes from ``read``, takes them as a
        big-endian integer and keeps its low ``B`` bits; the attempt is
        accepted when the value is below ``n!``. Acceptance is above 1/2.
        """
        while True:
            r = int.from_bytes(read(self.width), "big") & self.mask
            if r < self.limit:
                return r


@cache
def shuffler(n: int) -> Shuffler:
    """The Shuffler for decks of ``n`` cards (built once per size)."""
    bits = index_bits(n)
    return Shuffler(n, factorial(n), (1 << bits) - 1, (bits + 7) // 8, _compiled(n))


def uniform_index(n: int, read: Callable[[int], bytes]) -> int:
    """A uniform integer in ``[0, n!)`` read from ``read`` (see Shuffler)."""
    return shuffler(n).uniform_index(read)


def durstenfeld_reference(items: Sequence[T], index: int) -> tuple[T, ...]:
    """The normative shuffle: Durstenfeld's loop with ``j`` read from ``index``."""
    n = len(items)
    if not 0 <= index < factorial(n):
        raise ValueError("index must be in [0, n!)")
    deck = list(items)
    r = index
    for i in range(n - 1, 0, -1):
        r, j = divmod(r, i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


def shuffle_by_index(items: Sequence[T], index: int) -> tuple[T, ...]:
    """Same result as ``durstenfeld_reference``, computed faster."""
    n = len(items)
    if not 0 <= index < factorial(n):
        raise ValueError("index must be in [0, n!)")
    return shuffler(n).permute(index, list(items))


_TAIL = 7
"""The last steps (i < 7) touch only positions 0..6: one table lookup does them."""


@cache
def _tail_table() -> list[Callable[[list[Any]], tuple[Any, ...]]]:
    """For each r in [0, 7!), an itemgetter giving positions 0..6 after steps 6..1."""
    return [operator.itemgetter(*durstenfeld_reference(range(_TAIL), r)) for r in range(factorial(_TAIL))]


@cache
def _compiled(n: int) -> Callable[[int, list[T]], tuple[T, ...]]:
    """Straight-line Durstenfeld for ``n`` items: no loop, no tuple packing.

    Radices are grouped so that their product stays below 2**30: one big-int
    divmod per group, then single-digit arithmetic for the digits inside it.
    Position ``i`` is final once step ``i`` has run, so its card goes to a
    local ``c{i}`` instead of back into the list, and the locals become the
    result tuple. The last six steps only permute positions 0..6 and what is
    left of the index is below 7!, so a precomputed table does them at once.
    """
    if n < _TAIL:  # small decks are never hot: the reference loop does them
        return lambda r, a: durstenfeld_reference(a, r)
    lines = ["def permute(r, a):"]
    i = n - 1
    while i >= _TAIL:
        product, group = 1, []
        while i >= _TAIL and product * (i + 1) < _SMALL:
            product *= i + 1
            group.append(i)
            i -= 1
        lines.append(f"    r, s = divmod(r, {product})")
        for k in group:
            lines.append(f"    j = s % {k + 1}; s //= {k + 1}; c{k} = a[j]; a[j] = a[{k}]")
    lines.append("    " + "".join(f"c{k}, " for k in range(_TAIL)) + "= TAIL[r](a)")
    lines.append("    return (" + "".join(f"c{k}, " for k in range(n)) + ")")
    namespace: dict[str, Any] = {"TAIL": _tail_table()}
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from integers only
    permute: Callable[[int, list[T]], tuple[T, ...]] = namespace["permute"]
    return permute
