"""The statistical tests, each a pure function of counts (numpy and scipy).

Every test returns a ``Result`` with its statistic, degrees of freedom and p-value, plus
``log10_p`` from the log survival function, so a control that fails by a thousand orders of
magnitude still shows by how much. ``holm`` adjusts a whole table of p-values at once
(Holm-Bonferroni, at ``alpha`` over every test of every source). Why each test has the
distribution it claims (the card-by-position scaling, the Poisson duplicates):
docs/stats/README.md, "The tests".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from fairdeck.stats.tally import HASH_PRIME

MIN_EXPECTED = 5.0
"""Smallest expected count of a histogram cell after merging tails."""

LN10 = math.log(10)


@dataclass
class Result:
    """One test of one source."""

    source: str
    test: str
    statistic: float
    dof: float | None
    p: float
    log10_p: float
    note: str = ""
    p_adjusted: float = math.nan
    rejected: bool = False
    approximate: bool = False
    """Cells expect under MIN_EXPECTED decks: the p-value is shown, never trusted to reject."""

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "test": self.test,
            "statistic": self.statistic,
            "dof": self.dof,
            "p": self.p,
            "log10_p": self.log10_p,
            "p_adjusted": self.p_adjusted,
            "rejected": self.rejected,
            "approximate": self.approximate,
            "note": self.note,
        }


def chi2_log_sf(x: float, dof: float) -> float:
    """``ln P(chi2(dof) >= x)``, still finite far beyond where the survival function underflows.

    Past scipy's range it uses the first term of the asymptotic series,
    ``sf(x) ~ 2 x pdf(x) / (x - dof + 2)`` for ``x`` well above ``dof``.
    """
    log_p = float(stats.chi2.logsf(x, dof))
    if math.isfinite(log_p) or x <= dof:
        return log_p
    return float(stats.chi2.logpdf(x, dof)) + math.log(2 * x / (x - dof + 2))


def poisson_log_sf(k: int, mean: float) -> float:
    """``ln P(Poisson(mean) >= k)`` for ``k >= 1``; the first tail term when scipy underflows."""
    log_p = float(stats.poisson.logsf(k - 1, mean))
    if math.isfinite(log_p) or mean >= k:
        return log_p
    return k * math.log(mean) - mean - math.lgamma(k + 1)


def _chi2(
    source: str, test: str, statistic: float, dof: float, note: str, expected: float | None = None
) -> Result:
    """The chi-square Result; ``expected`` (fewest decks in a cell) below MIN_EXPECTED makes it approximate.

    An approximate result's chi-square tail can be wildly optimistic (a fair 50-deck pairs test
    scores p = 1e-10 in about 1% of runs), so ``holm`` never lets it reject; the note says so.
    """
    approximate = expected is not None and expected < MIN_EXPECTED
    if approximate:
        note += (
            f" (under {MIN_EXPECTED:g} expected per cell: the p-value is approximate and cannot reject; "
            "deal more decks)"
        )
    if dof <= 0:
        note += " (too few decks for this test)"
        return Result(source, test, statistic, dof, 1.0, 0.0, note, approximate=approximate)
    log_p = chi2_log_sf(statistic, dof)
    return Result(source, test, statistic, dof, math.exp(log_p), log_p / LN10, note, approximate=approximate)


def pearson(observed: npt.NDArray[np.integer], expected: npt.NDArray[np.floating] | float) -> float:
    """Pearson's ``X^2 = sum (O - E)^2 / E``."""
    diff = observed - expected
    return float((diff * diff / expected).sum())


def relative_deviation(matrix: npt.NDArray[np.integer]) -> tuple[float, int, int]:
    """Largest ``|count - N/n| / (N/n)`` of a card-by-position matrix, with its card and position."""
    n = matrix.shape[0]
    expected = matrix.sum() / (n * n)
    deviation = np.abs(matrix - expected) / expected
    card, position = np.unravel_index(int(np.argmax(deviation)), deviation.shape)
    return float(deviation[card, position]), int(card), int(position)


def position_test(source: str, matrix: npt.NDArray[np.integer]) -> Result:
    """Card-by-position chi-square, scaled for the permutation constraint.

    Why the scale: docs/stats/README.md, "The tests".
    """
    n = matrix.shape[0]
    decks = int(matrix[:, 0].sum())
    x2 = pearson(matrix, decks / n)
    worst, card, position = relative_deviation(matrix)
    note = (
        f"X^2 = {x2:,.1f} (scaled by {n - 1}/{n}); largest deviation {worst:.2%} (card {card} at {position})"
    )
    return _chi2(source, "position", x2 * (n - 1) / n, float((n - 1) ** 2), note, decks / n)


def standardised_residuals(matrix: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """``(O - E) / sqrt(E (1 - 1/n))`` per cell: each cell is binomial(N, 1/n), so about N(0, 1)."""
    n = matrix.shape[0]
    expected = matrix[:, 0].sum() / n
    return np.asarray((matrix - expected) / math.sqrt(expected * (1 - 1 / n)), dtype=np.float64)


def pair_test(source: str, pairs: npt.NDArray[np.integer]) -> Result:
    """Ordered first-two-card pairs against uniform over the ``n (n - 1)`` possible ones."""
    n = pairs.shape[0]
    diagonal = int(np.trace(pairs))
    off = pairs[~np.eye(n, dtype=bool)]
    decks = int(off.sum()) + diagonal
    cells = n * (n - 1)
    x2 = pearson(off, decks / cells)
    note = f"{cells:,} cells, {decks / cells:,.1f} decks expected in each"
    if diagonal:  # a card dealt twice: impossible for any permutation
        return Result(
            source, "pairs", math.inf, float(cells - 1), 0.0, -math.inf, note + "; a card dealt twice"
        )
    return _chi2(source, "pairs", x2, float(cells - 1), note, decks / cells)


def permutation_test(source: str, counts: npt.NDArray[np.integer], n: int, impossible: int = 0) -> Result:
    """Counts of the ``n!`` orders of an ``n``-card deck against uniform."""
    decks = int(counts.sum())
    cells = counts.shape[0]
    expected = decks / cells
    x2 = pearson(counts, expected)
    spread = (counts.min() - expected) / expected, (counts.max() - expected) / expected
    note = f"{cells} orders, {expected:,.0f} each expected; range {spread[0]:+.3%} to {spread[1]:+.3%}"
    test = f"perm-{n}"
    if impossible:
        return Result(
            source, test, math.inf, float(cells - 1), 0.0, -math.inf, note + "; non-permutations dealt"
        )
    return _chi2(source, test, x2, float(cells - 1), note, expected)


def merge_tails(
    observed: Sequence[int] | npt.NDArray[np.integer], probabilities: Sequence[float], decks: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], list[tuple[int, int]]]:
    """Histogram cells with their tails merged until each expects ``MIN_EXPECTED`` decks.

    Returns observed and expected counts of the merged cells and each merged
    cell's range of original indices (inclusive). The distributions here are
    unimodal, so only the tails need merging.
    """
    obs = np.asarray(observed, dtype=np.int64)
    exp = np.asarray(probabilities, dtype=np.float64) * decks
    size = len(exp)
    low = 0
    while low < size - 1 and exp[: low + 1].sum() < MIN_EXPECTED:
        low += 1
    high = size - 1
    while high > low and exp[high:].sum() < MIN_EXPECTED:
        high -= 1
    ranges = [(0, low)] + [(k, k) for k in range(low + 1, high)] + ([(high, size - 1)] if high > low else [])
    if ranges[-1][1] != size - 1:  # everything merged into one
        ranges = [(0, size - 1)]
    o = np.array([obs[a : b + 1].sum() for a, b in ranges], dtype=np.int64)
    e = np.array([exp[a : b + 1].sum() for a, b in ranges], dtype=np.float64)
    return o, e, ranges


def histogram_test(
    source: str, test: str, observed: npt.NDArray[np.integer], probabilities: Sequence[float], offset: int
) -> Result:
    """One number per deck, its histogram against exact probabilities (merged tails).

    ``offset`` is the value of index 0 (1 for rising sequences, 0 for successions).
    """
    decks = int(np.asarray(observed).sum())
    o, e, ranges = merge_tails(observed, probabilities, decks)
    values = np.arange(len(probabilities)) + offset
    mean = float((np.asarray(observed) * values).sum() / decks) if decks else math.nan
    expected_mean = float(np.dot(probabilities, values))
    outside = int(o[e == 0].sum()) if (e == 0).any() else 0
    note = f"mean {mean:.4f} (expected {expected_mean:.4f}); {len(ranges)} cells after merging tails"
    if outside:
        return Result(source, test, math.inf, float(len(ranges) - 1), 0.0, -math.inf, note)
    # merging stops at the tails: a middle cell can still expect under MIN_EXPECTED at a small N
    return _chi2(source, test, pearson(o, e), float(len(ranges) - 1), note, float(e.min()))


def duplicate_test(
    source: str, decks: int, repeated: int, n: int, *, reachable_bits: int | None = None
) -> Result:
    """Repeated decks among ``decks`` against their Poisson expectation.

    Why Poisson, and the hash's share of the mean: docs/stats/README.md, "The tests".
    """
    pairs = math.comb(decks, 2)
    collide = 1 / math.factorial(n) + 1 / HASH_PRIME**2 if n < 171 else 1 / HASH_PRIME**2
    mean = pairs * collide
    note = f"{repeated} repeated; {mean:.2g} expected for a uniform deck (hash collisions included)"
    if reachable_bits is not None:
        note += f"; {pairs / 2**reachable_bits:,.1f} expected if only 2^{reachable_bits} decks were reachable"
    if repeated == 0:
        return Result(source, "duplicates", 0.0, None, 1.0, 0.0, note)
    log_p = poisson_log_sf(repeated, mean)
    return Result(source, "duplicates", float(repeated), None, math.exp(log_p), log_p / LN10, note)


def holm(results: Sequence[Result], alpha: float) -> None:
    """Holm-Bonferroni over every result: sets ``p_adjusted`` and ``rejected`` in place.

    Adjusted ``p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`` over the p-values
    sorted ascending; a test is rejected when its adjusted p is at most ``alpha`` and it is not
    ``approximate``. An approximate result stays in the family (``m`` and its rank count) and
    gets its adjusted p, but never rejects. That keeps the guarantee for the trusted results: a
    true null of them ranked after ``k`` approximate ones and the false nulls is scaled by at
    least ``m0`` (the trusted true nulls), as in Holm's proof, so P(any trusted false rejection)
    stays at most ``alpha`` whatever the approximate p-values are; they add no false rejection.
    """
    m = len(results)
    running = 0.0
    for rank, result in enumerate(sorted(results, key=lambda r: r.log10_p)):
        # in log space, so p-values below 1e-308 keep their order and size
        scaled = min(0.0, result.log10_p + math.log10(m - rank))
        running = max(running, 10**scaled) if scaled > -300 else max(running, 0.0)
        result.p_adjusted = running
        result.rejected = running <= alpha and not result.approximate


def too_small(results: Sequence[Result], source: str, alpha: float) -> list[str]:
    """Tests of ``source`` that would have rejected it at ``alpha`` but are approximate (after ``holm``).

    They spoke, but at this N nobody can tell whether they are right: not a pass, not a rejection.
    """
    return [r.test for r in results if r.source == source and r.approximate and r.p_adjusted <= alpha]
