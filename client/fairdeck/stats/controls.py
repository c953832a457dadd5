"""Known-broken shuffles: negative controls for the statistical tests.

A statistical test that never fails proves nothing. These shuffles each carry
exactly one well-known bug, and the tests (and ``fairdeck stats``) run them at
the same sample size as fairdeck's own shuffle to show that the tests would
have caught the bug. Nothing here is used to deal.

Every control is a pure function of the items and of a deterministic source of
randomness passed in (a ``random.Random`` instance or anything else with
``getrandbits``), so a run is reproducible from its seed. Wherever a control
needs a uniform integer it draws it exactly (rejection on ``getrandbits``), so
the documented bug is the only thing wrong with it.

The bugs:

``naive_swap_any``
    For every position ``i`` in ``0..n-1``, swap it with a position ``j``
    uniform over the *whole* deck ``[0, n)``. This is the "faulty" shuffle of
    the Spanish-language post whose 3- and 4-card experiment the tests repeat
    (and of Jeff Atwood's "The Danger of Naïveté"): its ``n**n`` equally
    likely runs cannot map evenly onto the ``n!`` orders because ``n**n`` is
    not a multiple of ``n!`` for ``n > 2``. With 3 cards, the 27 runs give three orders 5 times
    and three orders 4 times.

``sattolo_off_by_one``
    Durstenfeld's loop with ``j`` uniform in ``[0, i)`` instead of ``[0, i]``:
    the classic off-by-one. It is Sattolo's algorithm, which yields only the
    ``(n - 1)!`` single-cycle permutations: no card ever stays in place, and
    for 3 cards only 2 of the 6 orders occur.

``modulo_biased``
    Durstenfeld's loop with ``j = raw % (i + 1)`` where ``raw`` is uniform in
    ``[0, 2**bits)`` (default: one random byte, the ``byte % n`` bug of code
    that reads ``os.urandom(1)`` or ``crypto.getRandomValues(new
    Uint8Array(1))`` per swap). Unless ``i + 1`` divides ``2**bits``, the
    first ``2**bits mod (i + 1)`` values of ``j`` get one extra ``raw``. At
    52 cards and 8 bits that is 5/256 against 4/256, a relative bias above
    20%; a card-by-position matrix over 20,000 decks sees it. At 3 or 4
    cards only the ``% 3`` step is biased (86/256 against 85/256, under 1%
    relative), and seeing that at p < 1e-9 takes three to four million decks,
    so the small-deck tests call it with ``bits=5`` (the same bug with a
    32-value generator). ``rand() % n`` with a ``RAND_MAX`` of 32767 has the
    same bug too, but at 52 cards its relative bias is about 0.16%: real,
    and far too small for a test suite to see.

``float_scaled_small``
    Durstenfeld's loop with ``j = floor(u * (i + 1))`` where ``u`` is a float
    in ``[0, 1)`` with only ``bits`` bits of precision (default 8: ``u =
    byte / 256``). This is the ``Math.floor(Math.random() * (i + 1))`` idiom
    of the Japanese article's example, made visibly wrong by a coarse ``u``:
    ``2**bits`` values of ``u`` cannot split evenly into ``i + 1`` ranges.
    The bias is as large as ``modulo_biased``'s but spread over the range
    instead of piled at its low end; the same note on ``bits`` applies.

``seeded_32bit``
    A correct Fisher-Yates (``random.Random.shuffle``) whose generator is
    seeded from only 32 bits of the seed it is given, as with C's
    ``srand(unsigned)`` or a seed taken from a timestamp. Its decks look
    uniform to any frequency test of practical size (the tests check that
    they pass one). The bug is reachability: at most ``2**32`` of the
    ``52!`` (about ``2**225.6``) orders can ever be dealt, and a few dealt
    cards plus a search of ``2**32`` seeds give the rest of the deck away.
    fairdeck's server seed is 45 bytes (``log2(52!) + 128`` bits, rounded
    up) and every bit of it reaches the deck. Its test checks that, not a
    frequency. ``seeded_32bit_from_source`` is the same shuffle with a full
    45-byte seed drawn from a source, for uniform use in ``CONTROLS``.

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
visible to frequency tests; ``seeded_32bit`` is not (see the module docstring)."""
