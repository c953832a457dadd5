"""fairdeck.lab.nist against a second computation on random inputs, not only the publication's own
examples: each test written again from SP 800-22 section 2 as plain loops over the bits, its
P-value from scipy.stats' distributions (chi2.sf, norm.sf) rather than the igamc/erfc forms the
module uses. Inputs are deterministic (PCG64), one of them biased, and short (tens of thousands
of bits) so the loops stay fast; the templates and excursions use smaller parameters for that."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fairdeck.lab import nist

CASES = {
    "uniform-a": (20_000, 0.0),
    "uniform-b": (26_113, 0.0),
    "biased": (24_000, 0.03),
}


def _bits(name: str) -> list[int]:
    n, bias = CASES[name]
    rng = np.random.Generator(np.random.PCG64(list(CASES).index(name)))
    bits = rng.integers(0, 2, size=n)
    forced = rng.random(n) < bias  # a biased stream: some bits forced to 1
    return [int(b) for b in np.where(forced, 1, bits)]


def _counts(e: list[int], m: int, wrap: bool) -> dict[tuple[int, ...], int]:
    ext = e + e[: m - 1] if wrap else e
    found: dict[tuple[int, ...], int] = {}
    for i in range(len(e) if wrap else len(e) - m + 1):
        key = tuple(ext[i : i + m])
        found[key] = found.get(key, 0) + 1
    return found


def pearson(observed: list[int], expected: list[float]) -> float:
    """Pearson's chi-square against ``expected`` (tables that sum to 1 only to their printed
    digits, so not scipy's chisquare, which insists), with len - 1 degrees of freedom."""
    chi2 = sum((o - x) ** 2 / x for o, x in zip(observed, expected, strict=True))
    return float(stats.chi2.sf(chi2, len(observed) - 1))


def frequency(e: list[int]) -> float:
    s = sum(2 * b - 1 for b in e)
    return float(2 * stats.norm.sf(abs(s) / math.sqrt(len(e))))


def block_frequency(e: list[int], m: int) -> float:
    blocks = len(e) // m
    chi2 = 4 * m * sum((sum(e[j * m : (j + 1) * m]) / m - 0.5) ** 2 for j in range(blocks))
    return float(stats.chi2.sf(chi2, blocks))


def runs(e: list[int]) -> float:
    n = len(e)
    pi = sum(e) / n
    v = 1 + sum(1 for k in range(n - 1) if e[k] != e[k + 1])
    z = abs(v - 2 * n * pi * (1 - pi)) / (2 * math.sqrt(n) * pi * (1 - pi))
    return float(2 * stats.norm.sf(z))  # erfc(x / sqrt 2) form of 2.3.4 (5) with x = z * sqrt 2


def serial(e: list[int], m: int) -> tuple[float, float]:
    n = len(e)

    def psi(k: int) -> float:
        return 0.0 if k <= 0 else 2**k / n * sum(c * c for c in _counts(e, k, True).values()) - n

    d1 = psi(m) - psi(m - 1)
    d2 = psi(m) - 2 * psi(m - 1) + psi(m - 2)
    return float(stats.chi2.sf(d1, 2 ** (m - 1))), float(stats.chi2.sf(d2, 2 ** (m - 2)))


def approximate_entropy(e: list[int], m: int) -> float:
    n = len(e)

    def phi(k: int) -> float:
        return sum(c / n * math.log(c / n) for c in _counts(e, k, True).values())

    chi2 = 2 * n * (math.log(2) - (phi(m) - phi(m + 1)))
    return float(stats.chi2.sf(chi2, 2**m))


def non_overlapping(e: list[int], m: int, blocks: int, template: int) -> float:
    size = len(e) // blocks
    want = [int(c) for c in format(template, f"0{m}b")]
    mean = (size - m + 1) / 2**m
    variance = size * (1 / 2**m - (2 * m - 1) / 2 ** (2 * m))
    chi2 = 0.0
    for j in range(blocks):
        block, count, i = e[j * size : (j + 1) * size], 0, 0
        while i <= size - m:  # 2.7.4 (2): a match skips the window, a miss slides one bit
            if block[i : i + m] == want:
                count, i = count + 1, i + m
            else:
                i += 1
        chi2 += (count - mean) ** 2 / variance
    return float(stats.chi2.sf(chi2, blocks))


def overlapping(e: list[int], m: int, size: int) -> float:
    blocks = len(e) // size
    nu = [0] * 6
    for j in range(blocks):
        block = e[j * size : (j + 1) * size]
        nu[min(sum(1 for i in range(size - m + 1) if block[i : i + m] == [1] * m), 5)] += 1
    expected = [blocks * p for p in nist.OVERLAPPING_PI]
    return pearson(nu, expected)


def excursions(e: list[int]) -> tuple[dict[int, float], dict[int, float]]:
    walk, s = [], 0
    for b in e:
        s += 2 * b - 1
        walk.append(s)
    padded = [0, *walk, 0]
    zeros = [i for i, v in enumerate(padded) if v == 0]
    cycles = [padded[zeros[k] : zeros[k + 1] + 1] for k in range(len(zeros) - 1)]
    j = len(cycles)

    def pi(x: int, k: int) -> float:  # section 3.14
        x = abs(x)
        if k == 0:
            return 1 - 1 / (2 * x)
        if k < 5:
            return 1 / (4 * x * x) * (1 - 1 / (2 * x)) ** (k - 1)
        return 1 / (2 * x) * (1 - 1 / (2 * x)) ** 4

    plain = {}
    for x in (-4, -3, -2, -1, 1, 2, 3, 4):
        nu = [0] * 6
        for cycle in cycles:
            nu[min(cycle.count(x), 5)] += 1
        plain[x] = pearson(nu, [j * pi(x, k) for k in range(6)])
    variant = {
        # 2.15.4 (5): erfc(|xi - J| / sqrt(2 J (4|x| - 2))), and erfc(y) = 2 P(N(0, 1) > y sqrt 2)
        x: float(2 * stats.norm.sf(abs(walk.count(x) - j) / math.sqrt(j * (4 * abs(x) - 2))))
        for x in (*range(-9, 0), *range(1, 10))
    }
    return plain, variant


def longest_run(e: list[int]) -> float:
    low, k, pi = nist._LONGEST[128]
    blocks = len(e) // 128
    nu = [0] * (k + 1)
    for j in range(blocks):
        best = run = 0
        for b in e[j * 128 : (j + 1) * 128]:
            run = run + 1 if b else 0
            best = max(best, run)
        nu[min(max(best, low), low + k) - low] += 1
    return pearson(nu, [blocks * p for p in pi])


def gf2_rank(rows: list[int], width: int) -> int:
    rank = 0
    for column in reversed(range(width)):
        pivot = next((r for r in rows if r >> column & 1), None)
        if pivot is None:
            continue
        rows.remove(pivot)
        rows = [r ^ pivot if r >> column & 1 else r for r in rows]
        rank += 1
    return rank


def rank(e: list[int]) -> float:
    count = len(e) // 1024
    observed = [0, 0, 0]
    for k in range(count):
        rows = [int("".join(map(str, e[k * 1024 + 32 * i : k * 1024 + 32 * (i + 1)])), 2) for i in range(32)]
        r = gf2_rank(rows, 32)
        observed[0 if r == 32 else 1 if r == 31 else 2] += 1
    probabilities = nist._rank_probabilities(32, 32)
    return pearson(observed, [count * p for p in probabilities])


def berlekamp_massey(s: list[int]) -> int:
    """The textbook form (lists of coefficients), not the module's bit-packed one."""
    n = len(s)
    c, b = [1] + [0] * n, [1] + [0] * n
    length, m = 0, -1
    for i in range(n):
        d = s[i]
        for k in range(1, length + 1):
            d ^= c[k] & s[i - k]
        if d:
            t = c[:]
            for k in range(n - i + m):
                c[i - m + k] ^= b[k]
            if length <= i // 2:
                length, m, b = i + 1 - length, i, t
    return length


@pytest.mark.parametrize("case", list(CASES))
def test_every_test_agrees_with_plain_loops_and_scipy(case: str) -> None:
    e = _bits(case)
    bits = np.asarray(e, dtype=np.uint8)
    close = {"abs": 1e-9}
    assert nist.frequency(bits)["frequency"] == pytest.approx(frequency(e), **close)
    got = nist.block_frequency(bits, 100)["block-frequency"]
    assert got == pytest.approx(block_frequency(e, 100), **close)
    if abs(sum(e) / len(e) - 0.5) < 2 / math.sqrt(len(e)):
        assert nist.runs(bits)["runs"] == pytest.approx(runs(e), **close)
    else:  # 2.3.4 (3): the frequency prerequisite fails, and the P-value is 0
        assert nist.runs(bits)["runs"] == 0.0
    assert nist.longest_run(bits)["longest-run"] == pytest.approx(longest_run(e), **close)
    assert nist.rank(bits)["rank"] == pytest.approx(rank(e), **close)
    for m in (3, 5, 8):
        got = nist.serial(bits, m)
        assert (got["serial-1"], got["serial-2"]) == pytest.approx(serial(e, m), **close)
        assert nist.approximate_entropy(bits, m)["approximate-entropy"] == pytest.approx(
            approximate_entropy(e, m), **close
        )
    templates = nist.non_overlapping_templates(bits, 6, 4)
    assert len(templates) == len(nist.aperiodic_templates(6))
    for t in nist.aperiodic_templates(6):
        assert templates[f"non-overlapping-{t:06b}"] == pytest.approx(non_overlapping(e, 6, 4, t), **close)
    assert nist.overlapping_template(bits)["overlapping"] == pytest.approx(overlapping(e, 9, 1032), **close)
    plain, variant = excursions(e)
    found = nist.random_excursions(bits, require_cycles=False)
    for x, p in plain.items():
        assert found[f"excursion{x:+d}"] == pytest.approx(p, abs=1e-7)
    found = nist.random_excursions_variant(bits, require_cycles=False)
    for x, p in variant.items():
        assert found[f"excursion-variant{x:+d}"] == pytest.approx(p, **close)
    for k in range(6):
        block = e[k * 500 : (k + 1) * 500]
        assert nist.linear_complexity_of(bits[k * 500 : (k + 1) * 500]) == berlekamp_massey(block)
