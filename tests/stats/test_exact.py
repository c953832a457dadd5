"""The exact distributions against brute-force enumeration of every permutation."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

np = pytest.importorskip("numpy")

from fairdeck.stats import exact  # noqa: E402
from fairdeck.stats.batch import riffle_from_labels  # noqa: E402


def rising_sequences(deck: tuple[int, ...]) -> int:
    where = {card: position for position, card in enumerate(deck)}
    return 1 + sum(where[c + 1] < where[c] for c in range(len(deck) - 1))


def successions(deck: tuple[int, ...]) -> int:
    return sum(deck[k + 1] == deck[k] + 1 for k in range(len(deck) - 1))


@pytest.mark.parametrize("n", range(1, 8))
def test_eulerian_and_successions_match_enumeration(n: int) -> None:
    rising = Counter(rising_sequences(p) for p in itertools.permutations(range(n)))
    follows = Counter(successions(p) for p in itertools.permutations(range(n)))
    assert exact.eulerian_row(n) == tuple(rising[r] for r in range(1, n + 1))
    assert exact.succession_counts(n) == tuple(follows[k] for k in range(n))


@pytest.mark.parametrize("n", [3, 52, 312])
def test_distributions_sum_to_one_with_the_known_means(n: int) -> None:
    assert sum(exact.eulerian_row(n)) == math.factorial(n)
    assert sum(exact.succession_counts(n)) == math.factorial(n)
    rising = exact.rising_sequence_probabilities(n)
    follows = exact.succession_probabilities(n)
    assert math.isclose(sum(rising), 1.0, rel_tol=1e-12)
    assert math.isclose(sum(follows), 1.0, rel_tol=1e-12)
    # E[rising sequences] = (n + 1) / 2; E[successions] = (n - 1) / n
    assert math.isclose(sum((r + 1) * p for r, p in enumerate(rising)), (n + 1) / 2, rel_tol=1e-12)
    assert math.isclose(sum(k * p for k, p in enumerate(follows)), (n - 1) / n, rel_tol=1e-12)


@pytest.mark.parametrize(("n", "shuffles"), [(3, 1), (4, 1), (4, 2)])
def test_riffle_control_has_the_gsr_distribution(n: int, shuffles: int) -> None:
    """Every label matrix, equally likely, gives exactly the Bayer-Diaconis probabilities."""
    a = 1 << shuffles
    labels = np.array(list(itertools.product(range(a), repeat=n)))
    decks = riffle_from_labels(labels)
    counts = Counter(tuple(int(c) for c in row) for row in decks)
    for deck, count in counts.items():
        r = rising_sequences(deck)
        assert count * a**n // len(labels) == math.comb(a + n - r, n)  # count / a**n = C(a + n - r, n) / a**n
    by_r = Counter()
    for deck, count in counts.items():
        by_r[rising_sequences(deck)] += count
    expected = exact.riffle_rising_sequence_probabilities(n, shuffles)
    assert [by_r[r] / len(labels) for r in range(1, n + 1)] == pytest.approx(expected)
