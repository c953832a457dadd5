"""The controls of ``fairdeck.stats.controls``, vectorised over many decks at once.

Each is the same algorithm, step for step, as its counterpart in ``fairdeck.stats.controls``,
with numpy, one deck per row: the same swaps in the same order, and the same randomness requests
(``getrandbits(k)``, with the same rejection loops) in the same order for each deck, handed out by
``Draws``; tests/stats replays them through the originals and checks every deck is identical.
Also here: ``riffle_7``, seven riffle shuffles of a sorted deck, the control that shows the
adjacency and rising-sequence tests have power (docs/stats/README.md, "The vectorised controls").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from fairdeck.stats.controls import FLOAT_BITS, MODULO_BITS, SEED32_MASK
from fairdeck.stats.mt import shuffle_seeded, swap

Rows = npt.NDArray[np.intp]
Values = npt.NDArray[np.uint64]
Decks = npt.NDArray[np.int16]

SEED_BITS = SEED32_MASK.bit_length()
"""Seed bits that reach ``seeded_32bit``'s generator: 32."""
RIFFLES = 7
"""Riffle shuffles of the ``riffle_7`` control."""


class Draws(Protocol):
    """Where a batch of decks gets its randomness."""

    def bits(self, k: int, rows: Rows) -> Values:
        """One uniform integer in ``[0, 2**k)`` for each deck listed in ``rows``, in that order."""
        ...


class GeneratorDraws:
    """Draws from a numpy ``Generator`` (exactly uniform, reproducible from its seed)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def bits(self, k: int, rows: Rows) -> Values:
        return np.asarray(self.rng.integers(0, 1 << k, size=rows.shape[0], dtype=np.uint64), dtype=np.uint64)


def _sorted_decks(n: int, count: int) -> tuple[Decks, npt.NDArray[np.int16], Rows, Rows]:
    deck = np.tile(np.arange(n, dtype=np.int16), (count, 1))
    everyone = np.arange(count, dtype=np.intp)
    return deck, deck.reshape(-1), everyone, everyone * n


def below(draws: Draws, m: int, rows: Rows) -> Rows:
    """``controls._below(source, m)`` for each listed deck: exact, by rejection."""
    if m == 1:
        return np.zeros(rows.shape[0], dtype=np.intp)
    k = (m - 1).bit_length()
    r = draws.bits(k, rows)
    bad = np.flatnonzero(r >= m)
    while bad.size:
        r[bad] = draws.bits(k, rows[bad])
        bad = bad[r[bad] >= m]
    return r.astype(np.intp)


def naive_swap_any(n: int, count: int, draws: Draws) -> Decks:
    """``controls.naive_swap_any``: every position swapped with one uniform over the deck."""
    deck, cells, everyone, start = _sorted_decks(n, count)
    for i in range(n):
        swap(cells, start, i, below(draws, n, everyone))
    return deck


def sattolo_off_by_one(n: int, count: int, draws: Draws) -> Decks:
    """``controls.sattolo_off_by_one``: Durstenfeld with ``j`` in ``[0, i)``."""
    deck, cells, everyone, start = _sorted_decks(n, count)
    for i in range(n - 1, 0, -1):
        swap(cells, start, i, below(draws, i, everyone))
    return deck


def modulo_biased(n: int, count: int, draws: Draws, *, bits: int = MODULO_BITS) -> Decks:
    """``controls.modulo_biased``: ``j = raw % (i + 1)`` with a ``bits``-bit ``raw``."""
    deck, cells, everyone, start = _sorted_decks(n, count)
    for i in range(n - 1, 0, -1):
        j = draws.bits(bits, everyone) % np.uint64(i + 1)
        swap(cells, start, i, j.astype(np.intp))
    return deck


def float_scaled_small(n: int, count: int, draws: Draws, *, bits: int = FLOAT_BITS) -> Decks:
    """``controls.float_scaled_small``: ``j = floor(u * (i + 1))``, ``u`` of ``bits`` bits.

    The same IEEE double operations as the Python version: ``raw / 2**bits``
    (exact), then one rounded multiplication, then floor.
    """
    scale = float(1 << bits)
    deck, cells, everyone, start = _sorted_decks(n, count)
    for i in range(n - 1, 0, -1):
        u = draws.bits(bits, everyone).astype(np.float64) / scale
        swap(cells, start, i, np.floor(u * float(i + 1)).astype(np.intp))
    return deck


def seeded_32bit(n: int, count: int, draws: Draws, *, seed_bits: int = SEED_BITS) -> Decks:
    """``controls.seeded_32bit``: ``random.Random(seed32).shuffle``.

    ``seeded_32bit_from_source`` draws a 45-byte seed of which only the low 32
    bits reach the generator, so only those 32 bits are drawn here. With
    ``seed_bits`` below 32 it is the same function given seeds with only that
    many random bits (a smaller state, so that duplicates show at a small N).
    """
    if not 1 <= seed_bits <= SEED_BITS:
        raise ValueError(f"seed_bits must be in 1..{SEED_BITS}")
    seeds = draws.bits(seed_bits, np.arange(count, dtype=np.intp)).astype(np.uint32)
    return shuffle_seeded(n, seeds)


def riffle_from_labels(labels: npt.NDArray[np.integer]) -> Decks:
    """Riffle-shuffled decks from each card's label (one row per deck).

    ``k`` inverse GSR riffles sort the cards stably by a uniform ``k``-bit
    label per card (Bayer-Diaconis); the deck after ``k`` riffles is the
    inverse of that order.
    """
    count, n = labels.shape
    inverse = np.argsort(labels, axis=1, kind="stable")
    deck = np.empty((count, n), dtype=np.int16)
    np.put_along_axis(deck, inverse, np.arange(n, dtype=np.int16)[None, :], axis=1)
    return deck


def riffle(n: int, count: int, draws: Draws, *, shuffles: int = RIFFLES) -> Decks:
    """``shuffles`` Gilbert-Shannon-Reeds riffle shuffles of a sorted deck."""
    labels = draws.bits(shuffles, np.repeat(np.arange(count, dtype=np.intp), n))
    return riffle_from_labels(labels.reshape(count, n))


Deal = Callable[[int, int, Draws], Decks]


@dataclass(frozen=True)
class BatchControl:
    """A control as ``fairdeck stats`` runs it."""

    name: str
    deal: Deal
    """(cards, decks, draws) to an array of decks, one row each, card ranks."""
    bug: str
    """What is wrong with it, in a line, for the report."""
    in_controls: bool
    """Whether it is one of ``fairdeck.stats.controls.CONTROLS`` (else an extra one defined here)."""


def controls(*, seed_bits: int = SEED_BITS) -> dict[str, BatchControl]:
    """Every control ``fairdeck stats`` runs, by the name the report shows."""
    if seed_bits == SEED_BITS:
        seeded_name, seeded_bug = "seeded_32bit", "a correct shuffle from a generator seeded with 32 bits"
    else:
        seeded_name = f"seeded_32bit@{seed_bits}bits"
        seeded_bug = f"seeded_32bit given seeds with only {seed_bits} random bits (a smaller state)"

    def seeded(n: int, count: int, draws: Draws) -> Decks:
        return seeded_32bit(n, count, draws, seed_bits=seed_bits)

    found = [
        BatchControl("naive_swap_any", naive_swap_any, "swaps each position with any position", True),
        BatchControl("sattolo_off_by_one", sattolo_off_by_one, "j in [0, i) instead of [0, i]", True),
        BatchControl("modulo_biased", modulo_biased, "j = random byte % (i + 1)", True),
        BatchControl("float_scaled_small", float_scaled_small, "j = floor(u * (i + 1)), u of 8 bits", True),
        BatchControl(seeded_name, seeded, seeded_bug, True),
        BatchControl(
            "riffle_7", riffle, "only seven riffle shuffles (extra, not in fairdeck.stats.controls)", False
        ),
    ]
    return {c.name: c for c in found}
