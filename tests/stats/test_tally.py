"""Streaming counts against a direct count of the same decks, deck by deck."""

from __future__ import annotations

import itertools

import pytest

np = pytest.importorskip("numpy")

from fairdeck.stats.tally import DeckTally, PermTally, deck_hashes, hash_keys, permutation_labels  # noqa: E402


@pytest.mark.parametrize("n", [5, 52, 300])
def test_deck_tally_counts_what_a_loop_counts(n: int) -> None:
    rng = np.random.default_rng(n)
    decks = np.argsort(rng.random((400, n)), axis=1)
    decks[7] = np.arange(n)  # one sorted deck: n - 1 successions, one rising sequence
    tally = DeckTally.empty(n)
    keys = hash_keys("t", n)
    tally.add(decks[:150], keys)
    second = DeckTally.empty(n)
    second.add(decks[150:], keys)
    tally.merge(second)
    position = np.zeros((n, n), dtype=np.int64)
    pairs = np.zeros((n, n), dtype=np.int64)
    follows = np.zeros(n, dtype=np.int64)
    rising = np.zeros(n, dtype=np.int64)
    for deck in decks.tolist():
        for place, card in enumerate(deck):
            position[card, place] += 1
        pairs[deck[0], deck[1]] += 1
        follows[sum(deck[k + 1] == deck[k] + 1 for k in range(n - 1))] += 1
        where = {card: place for place, card in enumerate(deck)}
        rising[sum(where[c + 1] < where[c] for c in range(n - 1))] += 1
    assert tally.decks == 400
    assert (tally.position == position).all()
    assert (tally.pairs == pairs).all()
    assert (tally.successions == follows).all()
    assert (tally.rising == rising).all()
    assert tally.successions[n - 1] >= 1 and tally.rising[0] >= 1


def test_repeated_decks_are_counted_and_distinct_ones_are_not() -> None:
    n = 52
    rng = np.random.default_rng(1)
    decks = np.argsort(rng.random((1000, n)), axis=1)
    decks[500:510] = decks[0]  # ten repeats of deck 0
    decks[900] = decks[899]  # and one more
    # decks differing only by a swap of two cards hash differently
    swapped = decks[1].copy()
    swapped[[3, 4]] = swapped[[4, 3]]
    decks[950] = swapped
    tally = DeckTally.empty(n)
    tally.add(decks, hash_keys("dup", n))
    assert tally.repeated_decks() == 11
    assert tally.hashes == []


def test_hashes_are_exact_linear_forms() -> None:
    n = 312
    keys = hash_keys("exact", n)
    deck = np.random.default_rng(2).permutation(n)[None, :]
    h = int(deck_hashes(deck, keys)[0])
    p = (1 << 31) - 1
    h1 = sum(int(c) * int(k) for c, k in zip(deck[0], keys[:, 0], strict=True)) % p
    h2 = sum(int(c) * int(k) for c, k in zip(deck[0], keys[:, 1], strict=True)) % p
    assert h == (h1 << 32) | h2


@pytest.mark.parametrize("n", [3, 4, 5])
def test_perm_tally_orders_follow_itertools(n: int) -> None:
    orders = list(itertools.permutations(range(n)))
    decks = np.array([orders[i % len(orders)] for i in range(3 * len(orders) + 1)])
    tally = PermTally.empty(n)
    tally.add(decks)
    counts = tally.counts().tolist()
    assert counts == [4] + [3] * (len(orders) - 1)
    assert tally.impossible() == 0
    assert permutation_labels(3) == ["AKQ", "AQK", "KAQ", "KQA", "QAK", "QKA"]
    broken = PermTally.empty(n)
    broken.add(np.zeros((2, n), dtype=np.int64))
    assert broken.impossible() == 2
