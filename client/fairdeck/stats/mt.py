"""CPython's ``random.Random(seed).shuffle`` for many 32-bit seeds at once.

The ``seeded_32bit`` control of ``fairdeck.stats.controls``, computed with numpy, one seed per
column: MT19937 seeding, the first twist and tempering, and ``shuffle``'s ``_randbelow``, each
step one vector operation over a batch of seeds. A deck that needs more outputs than were
computed is redone with ``random.Random`` itself; tests/stats checks outputs and decks against
``random.Random`` and ``seeded_32bit``. How each step maps onto CPython's:
docs/stats/README.md, "The vectorised controls".
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

N = 624
M = 397
_UPPER = np.uint32(0x80000000)
_LOWER = np.uint32(0x7FFFFFFF)
_MATRIX_A = np.uint32(0x9908B0DF)

U32 = npt.NDArray[np.uint32]


def _genrand_init() -> U32:
    """``init_genrand(19650218)``: the state every ``init_by_array`` starts from."""
    mt = [19650218]
    for i in range(1, N):
        prev = mt[-1]
        mt.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
    return np.array(mt, dtype=np.uint32)


_BASE = _genrand_init()


def seeded_states(seeds: U32) -> U32:
    """MT19937 states (624 x len(seeds)) after ``init_by_array([seed])`` for each seed."""
    count = seeds.shape[0]
    mt = np.repeat(_BASE[:, None], count, axis=1)
    t = np.empty(count, dtype=np.uint32)
    i = 1
    for _ in range(N):  # k = max(N, key_length) steps; j is always 0 with a one-word key
        prev = mt[i - 1]
        np.right_shift(prev, 30, out=t)
        np.bitwise_xor(t, prev, out=t)
        np.multiply(t, np.uint32(1664525), out=t)
        np.bitwise_xor(t, mt[i], out=t)
        np.add(t, seeds, out=mt[i])
        i += 1
        if i >= N:
            mt[0] = mt[N - 1]
            i = 1
    for _ in range(N - 1):
        prev = mt[i - 1]
        np.right_shift(prev, 30, out=t)
        np.bitwise_xor(t, prev, out=t)
        np.multiply(t, np.uint32(1566083941), out=t)
        np.bitwise_xor(t, mt[i], out=t)
        np.subtract(t, np.uint32(i), out=mt[i])
        i += 1
        if i >= N:
            mt[0] = mt[N - 1]
            i = 1
    mt[0] = _UPPER
    return mt


def _twist_rows(mt: U32, new: U32, lo: int, hi: int) -> None:
    """New state rows ``lo..hi-1`` of the first twist (``new`` holds rows below ``lo``)."""
    y = (mt[lo:hi] & _UPPER) | (mt[lo + 1 : hi + 1] & _LOWER)
    far = mt[lo + M : hi + M] if hi + M <= N else new[lo + M - N : hi + M - N]
    new[lo:hi] = far ^ (y >> 1) ^ ((y & 1) * _MATRIX_A)


def first_outputs(seeds: U32, rows: int) -> U32:
    """The first ``rows`` (at most 624) ``genrand_uint32`` outputs for each seed: (rows, len(seeds))."""
    if not 1 <= rows <= N:
        raise ValueError(f"rows must be in 1..{N}")
    mt = seeded_states(seeds)
    new = np.empty((rows, seeds.shape[0]), dtype=np.uint32)
    # Rows i < N - M read old rows i + M; later rows read new rows i + M - N,
    # which earlier blocks have already written. Row N - 1 wraps to new row 0.
    for lo in range(0, min(rows, N - 1), N - M):
        hi = min(lo + N - M, rows, N - 1)
        _twist_rows(mt, new, lo, hi)
    if rows == N:
        y = (mt[N - 1] & _UPPER) | (new[0] & _LOWER)
        new[N - 1] = new[M - 1] ^ (y >> 1) ^ ((y & 1) * _MATRIX_A)
    y = new
    y ^= y >> 11
    y ^= (y << 7) & np.uint32(0x9D2C5680)
    y ^= (y << 15) & np.uint32(0xEFC60000)
    y ^= y >> 18
    return y


def swap(
    cells: npt.NDArray[np.int16], row_start: npt.NDArray[np.intp], i: int, j: npt.NDArray[np.intp]
) -> None:
    """In every row of a flattened deck array, swap position ``i`` with that row's ``j``."""
    at_i = row_start + i
    at_j = row_start + j
    top = cells[at_i]
    cells[at_i] = cells[at_j]
    cells[at_j] = top


BATCH = 16_384
"""Seeds per vector pass: the 624-word states of a batch (40 MB) stay cache-friendly."""


def shuffle_seeded(n: int, seeds: U32, rows: int | None = None) -> npt.NDArray[np.int16]:
    """``random.Random(seed).shuffle(list(range(n)))`` for each seed: (len(seeds), n).

    ``rows``: how many outputs to compute per seed before falling back to
    ``random.Random`` for a deck that needs more (default: enough for the
    expected draws of ``n`` cards with a wide margin, at most 624).
    """
    if seeds.shape[0] > BATCH:
        parts = [shuffle_seeded(n, seeds[i : i + BATCH], rows) for i in range(0, seeds.shape[0], BATCH)]
        return np.concatenate(parts)
    count = seeds.shape[0]
    if rows is None:
        rows = min(N, 24 + 2 * n)
    flat = first_outputs(seeds, rows).reshape(-1)  # output t of seed c at t * count + c
    deck = np.tile(np.arange(n, dtype=np.int16), (count, 1))
    cells = deck.reshape(-1)
    everyone = np.arange(count)
    row_start = everyone * n
    pointer = np.zeros(count, dtype=np.intp)
    exhausted = np.zeros(count, dtype=bool)
    for i in range(n - 1, 0, -1):
        m = i + 1
        shift = 32 - m.bit_length()
        exhausted |= pointer >= rows
        r = flat[np.minimum(pointer, rows - 1) * count + everyone] >> shift
        pointer += 1
        bad = np.flatnonzero((r >= m) & ~exhausted)
        while bad.size:
            over = pointer[bad] >= rows
            exhausted[bad[over]] = True
            bad = bad[~over]
            r[bad] = flat[pointer[bad] * count + bad] >> shift
            pointer[bad] += 1
            bad = bad[r[bad] >= m]
        j = r.astype(np.intp)
        j[exhausted] = i  # junk for these rows, redone below
        swap(cells, row_start, i, j)
    for row in np.flatnonzero(exhausted):
        cards = list(range(n))
        random.Random(int(seeds[row])).shuffle(cards)
        deck[row] = cards
    return deck
