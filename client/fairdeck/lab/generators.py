"""Known-bad generators: every battery runs on them, at the volume of ours, and must reject each.

Each is deterministic (a function of the run's seed) with one well-known defect: ``lcg32``, the
32-bit LCG of Numerical Recipes (``a = 1664525, c = 1013904223``), each state as a 32-bit word;
``mt_low_bits_modulo``, MT19937 bytes ``(w & 0x7fff) % 255`` (``rand() % 255`` with a 15-bit
``RAND_MAX``: 255 never occurs); ``one_biased_bit``, PCG64 bytes whose lowest bit is 1 with
probability 0.55.

>>> lcg32(8, "doc").hex()
'01a79dd86cd4135c'
>>> 255 in mt_low_bits_modulo(4096, "doc")
False
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from functools import cache
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

LCG_A, LCG_C = 1664525, 1013904223
BIAS = 0.55
_BLOCK = 1 << 16
_CHUNK = 1 << 20


def _entropy(name: str, seed: str) -> int:
    return int.from_bytes(hashlib.sha256(f"fairdeck-lab {name}\0{seed}".encode()).digest(), "big")


@cache
def _lcg_jumps() -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """``a_j, c_j`` with ``x_{k+j} = a_j x_k + c_j mod 2^32`` for ``j`` in ``1 .. _BLOCK``."""
    a = np.empty(_BLOCK, dtype=np.uint64)
    c = np.empty(_BLOCK, dtype=np.uint64)
    aj, cj = 1, 0
    for j in range(_BLOCK):
        aj, cj = (LCG_A * aj) % 2**32, (LCG_A * cj + LCG_C) % 2**32
        a[j], c[j] = aj, cj
    return a, c


def _lcg32(seed: str) -> Iterator[bytes]:
    a, c = _lcg_jumps()
    x = np.uint64(_entropy("lcg32", seed) % 2**32)
    mask = np.uint64(0xFFFF_FFFF)
    while True:
        block = (a * x + c) & mask
        x = block[-1]
        yield block.astype("<u4").tobytes()


def _mt_low_bits_modulo(seed: str) -> Iterator[bytes]:
    mt = np.random.MT19937(_entropy("mt", seed) % 2**32)
    while True:
        words = mt.random_raw(_CHUNK).astype(np.uint64)
        yield ((words & np.uint64(0x7FFF)) % np.uint64(255)).astype(np.uint8).tobytes()


def _one_biased_bit(seed: str) -> Iterator[bytes]:
    rng = np.random.Generator(np.random.PCG64(_entropy("biased", seed)))
    while True:
        data = rng.integers(0, 256, size=_CHUNK, dtype=np.uint8) & np.uint8(0xFE)
        yield (data | (rng.random(_CHUNK) < BIAS).astype(np.uint8)).tobytes()


def chunks(name: str, size: int, seed: str) -> Iterator[bytes]:
    """The first ``size`` bytes of generator ``name`` for this seed, in chunks."""
    left = size
    for chunk in GENERATORS[name](seed):
        if left <= 0:
            return
        yield chunk[:left]
        left -= len(chunk)


def generate(name: str, size: int, seed: str) -> bytes:
    return b"".join(chunks(name, size, seed))


def lcg32(size: int, seed: str) -> bytes:
    return generate("lcg32", size, seed)


def mt_low_bits_modulo(size: int, seed: str) -> bytes:
    return generate("mt_low_bits_modulo", size, seed)


def one_biased_bit(size: int, seed: str) -> bytes:
    return generate("one_biased_bit", size, seed)


def write(name: str, f: BinaryIO, size: int, seed: str) -> None:
    """``size`` bytes of generator ``name`` into ``f`` (a file the same size as ours)."""
    for chunk in chunks(name, size, seed):
        f.write(chunk)


GENERATORS: dict[str, Callable[[str], Iterator[bytes]]] = {
    "lcg32": _lcg32,
    "mt_low_bits_modulo": _mt_low_bits_modulo,
    "one_biased_bit": _one_biased_bit,
}
"""Every bad generator, by name: seed -> its endless stream, in chunks."""

DESCRIPTIONS = {
    "lcg32": "32-bit LCG (Numerical Recipes: a = 1664525, c = 1013904223), every state as a 32-bit word",
    "mt_low_bits_modulo": "MT19937 output, (w & 0x7fff) % 255 per byte (rand() % 255 with a 15-bit RAND_MAX)",
    "one_biased_bit": f"PCG64 bytes with their lowest bit 1 with probability {BIAS}",
}
