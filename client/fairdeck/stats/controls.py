"""Known-broken shuffles: negative controls for the statistical tests, never used to deal.

Each control carries exactly one well-known bug, and the tests (and ``fairdeck stats``) run it at
the same sample size as fairdeck's own shuffle to show they would catch it. Every control is a
pure function of the items and a deterministic source with ``getrandbits`` (a run replays from its
seed), and draws its uniform integers exactly, so the documented bug is the only thing wrong with
it. Each bug and why a test sees it (or, for ``seeded_32bit``, why no frequency test can):
docs/stats/README.md, "The controls".

>>> import random
>>> sorted(naive_swap_any(range(6), random.Random(1))) == list(range(6))
True
>>> deck = sattolo_off_by_one(range(6), random.Random(1))
>>> any(card == position for position, card in enumerate(deck))
False
>>> high = bytes([255] * 41) + bytes(4)
>>> seeded_32bit(range(52), high) == seeded_32bit(range(52), bytes(45))
True
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")

MODULO_BITS = 8
"""Default width of ``modulo_biased``'s raw generator: one random byte."""
FLOAT_BITS = 8
"""Default precision of ``float_scaled_small``'s ``u``: 8 bits."""
SEED32_MASK = 0xFFFF_FFFF
"""The part of the seed that ``seeded_32bit`` lets reach its generator."""
SEED_BYTES = 45
"""Seed size ``seeded_32bit_from_source`` draws: fairdeck's standard-deck server seed."""


class BitSource(Protocol):
    """A deterministic source of random bits, such as ``random.Random``."""

    def getrandbits(self, k: int, /) -> int:
        """A uniform integer in ``[0, 2**k)``."""
        ...


Control = Callable[[Sequence[int], BitSource], tuple[int, ...]]
"""A broken shuffle: (items in canonical order, source) to the dealt order."""


def _below(source: BitSource, k: int) -> int:
    """An exactly uniform integer in ``[0, k)``, by rejection (k >= 1)."""
    if k == 1:
        return 0
    bits = (k - 1).bit_length()
    while True:
        r = source.getrandbits(bits)
        if r < k:
            return r


def _check_bits(bits: int) -> None:
    if bits < 1:
        raise ValueError(f"bits must be at least 1, got {bits}")


def naive_swap_any(items: Sequence[T], source: BitSource) -> tuple[T, ...]:
    """Swap every position with one uniform over the whole deck (biased for n > 2)."""
    deck = list(items)
    n = len(deck)
    for i in range(n):
        j = _below(source, n)
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


def sattolo_off_by_one(items: Sequence[T], source: BitSource) -> tuple[T, ...]:
    """Durstenfeld with ``j`` in ``[0, i)``: only single-cycle orders (Sattolo)."""
    deck = list(items)
    for i in range(len(deck) - 1, 0, -1):
        j = _below(source, i)
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


def modulo_biased(items: Sequence[T], source: BitSource, *, bits: int = MODULO_BITS) -> tuple[T, ...]:
    """Durstenfeld with ``j = raw % (i + 1)``, ``raw`` uniform in ``[0, 2**bits)``."""
    _check_bits(bits)
    deck = list(items)
    for i in range(len(deck) - 1, 0, -1):
        j = source.getrandbits(bits) % (i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


def float_scaled_small(items: Sequence[T], source: BitSource, *, bits: int = FLOAT_BITS) -> tuple[T, ...]:
    """Durstenfeld with ``j = floor(u * (i + 1))``, ``u`` a float of ``bits`` bits."""
    _check_bits(bits)
    scale = float(1 << bits)
    deck = list(items)
    for i in range(len(deck) - 1, 0, -1):
        u = source.getrandbits(bits) / scale  # exact: a bits-bit fraction in [0, 1)
        j = math.floor(u * (i + 1))
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


def seeded_32bit(items: Sequence[T], seed: bytes) -> tuple[T, ...]:
    """A correct shuffle from a generator seeded with the low 32 bits of ``seed``."""
    seed32 = int.from_bytes(seed, "big") & SEED32_MASK
    deck = list(items)
    random.Random(seed32).shuffle(deck)
    return tuple(deck)


def seeded_32bit_from_source(items: Sequence[T], source: BitSource) -> tuple[T, ...]:
    """``seeded_32bit`` with a ``SEED_BYTES``-byte seed drawn from ``source``."""
    seed = source.getrandbits(8 * SEED_BYTES).to_bytes(SEED_BYTES, "big")
    return seeded_32bit(items, seed)


CONTROLS: Mapping[str, Control] = {
    "naive_swap_any": naive_swap_any,
    "sattolo_off_by_one": sattolo_off_by_one,
    "modulo_biased": modulo_biased,
    "float_scaled_small": float_scaled_small,
    "seeded_32bit": seeded_32bit_from_source,
}
"""Every control with one signature, by name. All but ``seeded_32bit`` are
visible to frequency tests; ``seeded_32bit`` is not (docs/stats/README.md, "The controls")."""
