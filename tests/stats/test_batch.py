"""The vectorised controls are the controls of fairdeck.stats.controls, deck for deck.

Each batch function is run with a recording source of randomness; then every
deck's recorded values are played back, in order, through the original
function of ``fairdeck.stats.controls``, which must deal the identical deck and
consume exactly the values the batch consumed. The seeded control is also
checked against ``random.Random`` directly, output by output.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence

import pytest

np = pytest.importorskip("numpy")

from fairdeck.stats import (  # noqa: E402
    batch,
    controls,
    mt,
)


class Recorder:
    """A batch Draws that logs, per deck, every (bits, value) it handed out."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.log: dict[int, list[tuple[int, int]]] = defaultdict(list)

    def bits(self, k: int, rows: np.ndarray) -> np.ndarray:
        values = self.rng.integers(0, 1 << k, size=rows.shape[0], dtype=np.uint64)
        for row, value in zip(rows.tolist(), values.tolist(), strict=True):
            self.log[row].append((k, value))
        return values


class Playback:
    """A ``getrandbits`` source for fairdeck.stats.controls that replays one deck's log."""

    def __init__(
        self, log: Sequence[tuple[int, int]], widen: Callable[[int, int, int], int] | None = None
    ) -> None:
        self.log = list(log)
        self.used = 0
        self.widen = widen

    def getrandbits(self, k: int, /) -> int:
        bits, value = self.log[self.used]
        self.used += 1
        if self.widen is not None:
            return self.widen(k, bits, value)
        assert bits == k, f"the original asked for {k} bits where the batch drew {bits}"
        return value


ORIGINALS = {
    "naive_swap_any": controls.naive_swap_any,
    "sattolo_off_by_one": controls.sattolo_off_by_one,
    "modulo_biased": controls.modulo_biased,
    "float_scaled_small": controls.float_scaled_small,
}


@pytest.mark.parametrize("n", [52, 3, 2])
@pytest.mark.parametrize("name", list(ORIGINALS))
def test_batch_control_deals_the_same_decks_as_the_original(name: str, n: int) -> None:
    recorder = Recorder(hash((name, n)) & 0xFFFF)
    decks = batch.controls()[name].deal(n, 300, recorder)
    assert decks.shape == (300, n)
    for row in range(300):
        source = Playback(recorder.log[row])
        assert ORIGINALS[name](range(n), source) == tuple(int(c) for c in decks[row]), f"deck {row}"
        assert source.used == len(recorder.log[row]), "the original consumed fewer values"


@pytest.mark.parametrize("n", [52, 5])
def test_seeded_32bit_batch_is_the_original(n: int) -> None:
    """seeded_32bit_from_source draws 360 bits of which the low 32 reach the generator."""
    recorder = Recorder(n)
    decks = batch.controls()["seeded_32bit"].deal(n, 200, recorder)
    high = random.Random(n)

    def widen(k: int, bits: int, value: int) -> int:
        assert (k, bits) == (8 * controls.SEED_BYTES, 32)
        return (high.getrandbits(k - 32) << 32) | value  # any high bits: they must not matter

    for row in range(200):
        source = Playback(recorder.log[row], widen)
        assert controls.seeded_32bit_from_source(range(n), source) == tuple(int(c) for c in decks[row])


def test_reduced_seed_variant_is_the_original_given_fewer_random_bits() -> None:
    recorder = Recorder(24)
    decks = batch.controls(seed_bits=24)["seeded_32bit@24bits"].deal(52, 100, recorder)
    for row in range(100):
        ((bits, value),) = recorder.log[row]
        assert bits == 24
        assert controls.seeded_32bit(range(52), value.to_bytes(45, "big")) == tuple(
            int(c) for c in decks[row]
        )


def test_mersenne_twister_outputs_match_random_random() -> None:
    seeds = np.array([0, 1, 2**31, 2**32 - 1, *range(12345, 12345 + 60)], dtype=np.uint32)
    outputs = mt.first_outputs(seeds, mt.N)
    for column, seed in enumerate(seeds.tolist()):
        r = random.Random(seed)
        assert outputs[:, column].tolist() == [r.getrandbits(32) for _ in range(mt.N)]


@pytest.mark.parametrize(("n", "rows"), [(52, 60), (52, 75), (312, mt.N), (3, 4)])
def test_decks_that_run_out_of_outputs_fall_back_to_random_random(n: int, rows: int) -> None:
    """With few precomputed outputs many decks need more; they are redone exactly."""
    seeds = np.random.default_rng(rows).integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32)
    decks = mt.shuffle_seeded(n, seeds, rows)
    for row, seed in enumerate(seeds.tolist()):
        expected = list(range(n))
        random.Random(seed).shuffle(expected)
        assert decks[row].tolist() == expected
