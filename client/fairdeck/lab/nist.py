"""NIST SP 800-22 Rev. 1a's fifteen tests, on numpy arrays of bits (0/1, ``uint8``).

Each function takes the bits and the test's parameters, and returns ``{statistic name: p-value}``
(several for the cumulative sums, templates, serial and excursion tests). The formulas,
parameters and constants are SP 800-22 section 2's, and where the publication leaves a choice
(parameter defaults by ``n``, tables of class probabilities) those of NIST's reference code,
sts-2.1.2, which produced its Appendix B. ``tests/lab/test_nist.py`` checks every test against
the worked examples of section 2 and the Appendix B P-values for 10^6 bits of e, sqrt 2 and
sqrt 3, to the six digits printed, and says where the publication itself is wrong.

Why not a package from PyPI: ``nistrng`` 1.2.3, the most used, was checked first and disagrees
with Appendix B on nine of the fifteen tests (docs/certification.md lists them), so this module
replaces it. ``sequence_results`` runs every test on one sequence (the defaults ``assess`` uses).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy import special

Bits = npt.NDArray[np.uint8]
Results = dict[str, float]

SQRT2 = math.sqrt(2.0)
MIN_BITS = 387_840
"""The shortest sequence every test runs on (Maurer's universal test, L = 6)."""


def igamc(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x) (section 5.5.3)."""
    return float(special.gammaincc(a, x))


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / SQRT2)


def _tdiv(a: int, b: int) -> int:
    """C's integer division (truncated toward zero), as sts-2.1.2 computes its loop bounds."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def bits_from_text(text: str) -> Bits:
    """``"0110..."`` as bits (whitespace ignored)."""
    clean = "".join(text.split())
    return np.frombuffer(clean.encode("ascii"), dtype=np.uint8) - np.uint8(48)


def bits_from_bytes(data: bytes) -> Bits:
    """Bytes as bits, most significant bit of each byte first (the order of ``assess``' binary input)."""
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8))


# --- 2.1 to 2.4 ---------------------------------------------------------------------------


def frequency(bits: Bits) -> Results:
    n = bits.size
    s = 2 * int(bits.sum()) - n
    return {"frequency": math.erfc(abs(s) / math.sqrt(n) / SQRT2)}


def block_frequency(bits: Bits, m: int = 128) -> Results:
    blocks = bits.size // m
    pi = bits[: blocks * m].reshape(blocks, m).sum(axis=1) / m
    chi2 = 4.0 * m * float(((pi - 0.5) ** 2).sum())
    return {"block-frequency": igamc(blocks / 2, chi2 / 2)}


def cumulative_sums(bits: Bits) -> Results:
    n = bits.size
    walk = np.cumsum(2 * bits.astype(np.int64) - 1)
    found = {}
    for mode, path in (("forward", walk), ("reverse", walk[-1] - np.concatenate(([0], walk[:-1])))):
        z = int(np.abs(path).max())
        root = math.sqrt(n)
        sum1 = sum(
            _phi((4 * k + 1) * z / root) - _phi((4 * k - 1) * z / root)
            for k in range(_tdiv(_tdiv(-n, z) + 1, 4), _tdiv(_tdiv(n, z) - 1, 4) + 1)
        )
        sum2 = sum(
            _phi((4 * k + 3) * z / root) - _phi((4 * k + 1) * z / root)
            for k in range(_tdiv(_tdiv(-n, z) - 3, 4), _tdiv(_tdiv(n, z) - 1, 4) + 1)
        )
        found[f"cusum-{mode}"] = 1.0 - sum1 + sum2
    return found


def runs(bits: Bits) -> Results:
    n = bits.size
    pi = float(bits.sum()) / n
    if abs(pi - 0.5) >= 2 / math.sqrt(n):  # 2.3.4 (3): the frequency prerequisite fails
        return {"runs": 0.0}
    v = 1 + int(np.count_nonzero(bits[1:] != bits[:-1]))
    return {"runs": math.erfc(abs(v - 2 * n * pi * (1 - pi)) / (2 * math.sqrt(2 * n) * pi * (1 - pi)))}


_LONGEST = {
    # M: (smallest class, K, class probabilities) as sts-2.1.2 has them (section 3.4's table)
    8: (1, 3, (0.21484375, 0.3671875, 0.23046875, 0.1875)),
    128: (4, 5, (0.1174035788, 0.242955959, 0.249363483, 0.17517706, 0.102701071, 0.112398847)),
    10_000: (10, 6, (0.0882, 0.2092, 0.2483, 0.1933, 0.1208, 0.0675, 0.0727)),
}


def longest_run(bits: Bits) -> Results:
    n = bits.size
    m = 8 if n < 6272 else 128 if n < 750_000 else 10_000
    low, k, pi = _LONGEST[m]
    blocks = n // m
    padded = np.zeros((blocks, m + 2), dtype=np.uint8)
    padded[:, 1:-1] = bits[: blocks * m].reshape(blocks, m)
    zeros = np.flatnonzero(padded.ravel() == 0)
    lengths = np.diff(zeros) - 1
    longest = np.zeros(blocks, dtype=np.int64)
    np.maximum.at(longest, zeros[:-1] // (m + 2), lengths)
    nu = np.bincount(np.clip(longest, low, low + k) - low, minlength=k + 1)
    expected = blocks * np.asarray(pi)
    chi2 = float(((nu - expected) ** 2 / expected).sum())
    return {"longest-run": igamc(k / 2, chi2 / 2)}


# --- 2.5 rank, 2.6 spectral -----------------------------------------------------------------


def gf2_ranks(rows: npt.NDArray[np.uint64], width: int) -> npt.NDArray[np.int64]:
    """Ranks over GF(2) of many matrices at once: ``rows[k, i]`` is row ``i`` of matrix ``k``."""
    a = rows.copy()
    count, height = a.shape
    used = np.zeros((count, height), dtype=bool)
    rank = np.zeros(count, dtype=np.int64)
    everyone = np.arange(count)
    for column in range(width - 1, -1, -1):
        bit = np.uint64(1) << np.uint64(column)
        has = (a & bit) != 0
        candidates = has & ~used
        found = candidates.any(axis=1)
        pivot = np.argmax(candidates, axis=1)
        pivot_rows = a[everyone, pivot]
        clear = has & found[:, None]
        clear[everyone, pivot] = False
        a = np.where(clear, a ^ pivot_rows[:, None], a)
        used[everyone[found], pivot[found]] = True
        rank += found
    return rank


@cache
def _rank_probabilities(m: int = 32, q: int = 32) -> tuple[float, float, float]:
    """P(rank = M), P(rank = M - 1) and the rest, as sts-2.1.2 computes them (section 3.5)."""

    def p(r: int) -> float:
        product = 1.0
        for i in range(r):
            product *= ((1 - 2.0 ** (i - q)) * (1 - 2.0 ** (i - m))) / (1 - 2.0 ** (i - r))
        return float(2.0 ** (r * (q + m - r) - m * q) * product)

    full, less = p(m), p(m - 1)
    return full, less, 1 - full - less


def rank(bits: Bits, m: int = 32, q: int = 32) -> Results:
    count = bits.size // (m * q)
    matrices = bits[: count * m * q].reshape(count, m, q)
    rows = (matrices.astype(np.uint64) << np.arange(q - 1, -1, -1, dtype=np.uint64)).sum(axis=2)
    ranks = gf2_ranks(rows.astype(np.uint64), q)
    observed = np.array([(ranks == m).sum(), (ranks == m - 1).sum(), (ranks < m - 1).sum()])
    expected = count * np.asarray(_rank_probabilities(m, q))
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    return {"rank": math.exp(-chi2 / 2)}


def spectral(bits: Bits) -> Results:
    n = bits.size
    moduli = np.abs(np.fft.rfft(2.0 * bits - 1.0))[: n // 2]
    threshold = math.sqrt(math.log(1 / 0.05) * n)
    n0 = 0.95 * n / 2
    n1 = int(np.count_nonzero(moduli < threshold))
    d = (n1 - n0) / math.sqrt(n * 0.95 * 0.05 / 4)
    return {"spectral": math.erfc(abs(d) / SQRT2)}


# --- 2.7, 2.8 templates -----------------------------------------------------------------------


def windows(bits: Bits, m: int, wrap: bool = False) -> npt.NDArray[np.int64]:
    """The value of every ``m``-bit window (first bit most significant); with ``wrap``, ``n`` of them."""
    data = np.concatenate((bits, bits[: m - 1])) if wrap else bits
    count = data.size - m + 1
    values = np.zeros(count, dtype=np.int64)
    for k in range(m):
        values = (values << 1) | data[k : k + count]
    return values


@cache
def aperiodic_templates(m: int) -> tuple[int, ...]:
    """The templates of ``m`` bits no proper shift of which overlaps itself (sts' templates file)."""
    found = []
    for t in range(1 << m):
        text = format(t, f"0{m}b")
        if all(text[k:] != text[: m - k] for k in range(1, m)):
            found.append(t)
    return tuple(found)


def non_overlapping_templates(bits: Bits, m: int = 9, blocks: int = 8) -> Results:
    """Every aperiodic template of ``m`` bits. Two matches of an aperiodic template never overlap,
    so its non-overlapping count in a block equals the count of windows that match."""
    size = bits.size // blocks
    mean = (size - m + 1) / 2**m
    variance = size * (1 / 2**m - (2 * m - 1) / 2 ** (2 * m))
    counts = np.stack(
        [np.bincount(windows(bits[j * size : (j + 1) * size], m), minlength=1 << m) for j in range(blocks)]
    )
    found = {}
    for t in aperiodic_templates(m):
        chi2 = float(((counts[:, t] - mean) ** 2).sum() / variance)
        found[f"non-overlapping-{t:0{m}b}"] = igamc(blocks / 2, chi2 / 2)
    return found


OVERLAPPING_PI = (0.364091, 0.185659, 0.139381, 0.100571, 0.0704323, 0.139865)
"""sts-2.1.2's class probabilities for m = 9, M = 1032 (section 3.8, corrected in Rev. 1a)."""


def overlapping_template(bits: Bits, m: int = 9, size: int = 1032) -> Results:
    count = bits.size // size
    template = (1 << m) - 1
    per_block = windows(bits[: count * size].reshape(count, size).reshape(-1), m)
    hits = np.zeros(count, dtype=np.int64)
    starts = np.arange(per_block.size)
    valid = (starts % size) <= size - m  # windows inside one block only
    np.add.at(hits, starts[valid & (per_block == template)] // size, 1)
    nu = np.bincount(np.minimum(hits, 5), minlength=6)
    expected = count * np.asarray(OVERLAPPING_PI)
    chi2 = float(((nu - expected) ** 2 / expected).sum())
    return {"overlapping": igamc(5 / 2, chi2 / 2)}


# --- 2.9 universal, 2.10 linear complexity ------------------------------------------------------

_UNIVERSAL_L = (
    (1_059_061_760, 16), (496_435_200, 15), (231_669_760, 14), (107_560_960, 13), (49_643_520, 12),
    (22_753_280, 11), (10_342_400, 10), (4_654_080, 9), (2_068_480, 8), (904_960, 7), (387_840, 6),
)  # fmt: skip
_UNIVERSAL_EXPECTED = {
    6: (5.2177052, 2.954), 7: (6.1962507, 3.125), 8: (7.1836656, 3.238), 9: (8.1764248, 3.311),
    10: (9.1723243, 3.356), 11: (10.170032, 3.384), 12: (11.168765, 3.401), 13: (12.168070, 3.410),
    14: (13.167693, 3.416), 15: (14.167488, 3.419), 16: (15.167379, 3.421),
}  # fmt: skip


def universal(bits: Bits, l: int | None = None, q: int | None = None) -> Results:  # noqa: E741
    n = bits.size
    if l is None:
        l = next((size for least, size in _UNIVERSAL_L if n >= least), 0)  # noqa: E741
        if l == 0:
            raise ValueError(f"Maurer's universal test needs at least {MIN_BITS:,} bits")
    q = q if q is not None else 10 * 2**l
    k = n // l - q
    values = bits[: (q + k) * l].reshape(q + k, l).astype(np.int64) @ (1 << np.arange(l - 1, -1, -1))
    position = np.arange(1, q + k + 1)
    order = np.lexsort((position, values))
    same = np.concatenate(([False], values[order][1:] == values[order][:-1]))
    previous = np.where(same, np.concatenate(([0], position[order][:-1])), 0)
    test = position[order] > q
    total = float(np.log2(position[order][test] - previous[test]).sum())
    phi = total / k
    expected, variance = _UNIVERSAL_EXPECTED.get(l, (0.0, 0.0))
    if variance == 0.0:  # the worked example's small L: the statistic alone is checked
        return {"universal": math.nan, "universal-fn": phi}
    c = 0.7 - 0.8 / l + (4 + 32 / l) * k ** (-3 / l) / 15
    sigma = c * math.sqrt(variance / k)
    return {"universal": math.erfc(abs(phi - expected) / (SQRT2 * sigma))}


def linear_complexity_of(block: Bits) -> int:
    """Berlekamp-Massey over GF(2): the length of the shortest LFSR that generates ``block``."""
    c, b = 1, 1  # connection polynomials, bit i = coefficient of x^i
    length, m, history = 0, -1, 0
    for n, s in enumerate(block.tolist()):
        history = (history << 1) | s  # bit i = s[n - i]
        if (c & history).bit_count() & 1:
            t = c
            c ^= b << (n - m)
            if length <= n // 2:
                length, m, b = n + 1 - length, n, t
    return length


LINEAR_COMPLEXITY_PI = (0.010417, 0.03125, 0.125, 0.5, 0.25, 0.0625, 0.020833)
"""Section 3.10's class probabilities (pi_0 = 1/96; sts-2.1.2 has the misprint 0.01047)."""


def linear_complexity(bits: Bits, m: int = 500, pi: tuple[float, ...] = LINEAR_COMPLEXITY_PI) -> Results:
    count = bits.size // m
    mu = m / 2 + (9 + (-1) ** (m + 1)) / 36 - (m / 3 + 2 / 9) / 2**m
    blocks = bits[: count * m].reshape(count, m)
    t = np.array([(-1) ** m * (linear_complexity_of(block) - mu) + 2 / 9 for block in blocks])
    nu = np.bincount(np.searchsorted([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], t, side="left"), minlength=7)
    expected = count * np.asarray(pi)
    chi2 = float(((nu - expected) ** 2 / expected).sum())
    return {"linear-complexity": igamc(3, chi2 / 2)}


# --- 2.11 serial, 2.12 approximate entropy --------------------------------------------------


def _psi2(bits: Bits, m: int) -> float:
    if m <= 0:
        return 0.0
    counts = np.bincount(windows(bits, m, wrap=True), minlength=1 << m).astype(np.float64)
    return float((counts**2).sum() * 2**m / bits.size - bits.size)


def serial(bits: Bits, m: int = 16) -> Results:
    psi = [_psi2(bits, m - k) for k in range(3)]
    d1 = psi[0] - psi[1]
    d2 = psi[0] - 2 * psi[1] + psi[2]
    return {"serial-1": igamc(2 ** (m - 2), d1 / 2), "serial-2": igamc(2 ** (m - 3), d2 / 2)}


def _phi_m(bits: Bits, m: int) -> float:
    if m <= 0:
        return 0.0
    counts = np.bincount(windows(bits, m, wrap=True), minlength=1 << m)
    c = counts[counts > 0] / bits.size
    return float((c * np.log(c)).sum())


def approximate_entropy(bits: Bits, m: int = 10) -> Results:
    n = bits.size
    apen = _phi_m(bits, m) - _phi_m(bits, m + 1)
    chi2 = 2.0 * n * (math.log(2) - apen)
    return {"approximate-entropy": igamc(2 ** (m - 1), chi2 / 2)}


# --- 2.14, 2.15 random excursions -------------------------------------------------------------

_EXCURSION_PI = {
    1: (0.5, 0.25, 0.125, 0.0625, 0.03125, 0.03125),
    2: (0.75, 0.0625, 0.046875, 0.03515625, 0.0263671875, 0.0791015625),
    3: (0.8333333333, 0.02777777778, 0.02314814815, 0.01929012346, 0.01607510288, 0.0803755144),
    4: (0.875, 0.015625, 0.013671875, 0.01196289063, 0.0104675293, 0.0732727051),
}


def _cycles(bits: Bits) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    walk = np.cumsum(2 * bits.astype(np.int64) - 1)
    zero = walk == 0
    cycle = np.cumsum(zero) - zero  # a return to 0 ends its cycle
    cycles = int(zero.sum()) + (0 if walk[-1] == 0 else 1)
    return walk, cycle, cycles


def excursion_cycles_needed(n: int) -> int:
    """Fewer cycles than this and sts-2.1.2 declares both excursion tests not applicable."""
    return max(500, int(0.005 * math.sqrt(n)))


def random_excursions(bits: Bits, *, require_cycles: bool = True) -> Results:
    walk, cycle, j = _cycles(bits)
    if require_cycles and j < excursion_cycles_needed(bits.size):
        return {}
    found = {}
    for x in (-4, -3, -2, -1, 1, 2, 3, 4):
        visits = np.bincount(cycle[walk == x], minlength=j)
        nu = np.bincount(np.minimum(visits, 5), minlength=6)
        expected = j * np.asarray(_EXCURSION_PI[abs(x)])
        chi2 = float(((nu - expected) ** 2 / expected).sum())
        found[f"excursion{x:+d}"] = igamc(5 / 2, chi2 / 2)
    return found


def random_excursions_variant(bits: Bits, *, require_cycles: bool = True) -> Results:
    walk, _, j = _cycles(bits)
    if require_cycles and j < excursion_cycles_needed(bits.size):
        return {}
    states = np.bincount(walk[(walk >= -9) & (walk <= 9)] + 9, minlength=19)
    found = {}
    for x in (*range(-9, 0), *range(1, 10)):
        spread = math.sqrt(2 * j * (4 * abs(x) - 2))
        found[f"excursion-variant{x:+d}"] = math.erfc(abs(int(states[x + 9]) - j) / spread)
    return found


TESTS: tuple[tuple[str, Callable[[Bits], Results]], ...] = (
    ("frequency", frequency),
    ("block-frequency", block_frequency),
    ("cumulative-sums", cumulative_sums),
    ("runs", runs),
    ("longest-run", longest_run),
    ("rank", rank),
    ("spectral", spectral),
    ("non-overlapping", non_overlapping_templates),
    ("overlapping", overlapping_template),
    ("universal", universal),
    ("approximate-entropy", approximate_entropy),
    ("random-excursions", random_excursions),
    ("random-excursions-variant", random_excursions_variant),
    ("serial", serial),
    ("linear-complexity", linear_complexity),
)
"""Every test with ``assess``' default parameters (block frequency M = 128, templates m = 9,
approximate entropy m = 10, serial m = 16, linear complexity M = 500), in its order."""


def sequence_results(bits: Bits) -> Results:
    """Every statistic of every test on one sequence (at least 387,840 bits: the universal test's)."""
    found: Results = {}
    for _, test in TESTS:
        found.update(test(bits))
    return found
