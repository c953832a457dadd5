"""Where decks come from: ours is the public derivation, replayable deck by deck."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from fairdeck.core.derivation import derive_deck, plan  # noqa: E402
from fairdeck.core.versions import CURRENT_VERSION  # noqa: E402
from fairdeck.stats.sampling import (  # noqa: E402
    CHUNK,
    Job,
    RunSpec,
    jobs_for,
    ours_decks,
    rank_table,
    server_seed,
    small_plan,
)


@pytest.mark.parametrize("deck", ["standard", "short", "shoe-2"])
def test_every_deck_of_ours_is_derive_deck_with_the_documented_inputs(deck: str) -> None:
    spec = RunSpec(deck, 50, 50, "replay")
    ranks = ours_decks(spec, Job("ours", rank_table(deck).max() + 1, False, 1000, 50))
    card_ids = np.flatnonzero(rank_table(deck) >= 0)  # rank r is the r-th card id of the spec
    for k, i in enumerate(range(1000, 1050)):
        seed = server_seed("replay", deck, i, plan(CURRENT_VERSION, deck).seed_bytes)
        assert tuple(card_ids[ranks[k]]) == derive_deck(deck, f"stats-{i}", seed)


def test_small_decks_use_the_production_plan_code() -> None:
    p = small_plan(4)
    assert p.spec.card_ids == (0, 1, 2, 3) and p.stream_prefix.endswith(b"fairdeck-v1 stream")
    spec = RunSpec("standard", 10, 10, "s")
    ranks = ours_decks(spec, Job("ours", 4, True, 0, 10))
    for i in range(10):
        seed = server_seed("s", "perm-4", i, p.seed_bytes)
        assert tuple(ranks[i]) == p.derive(f"stats-{i}", seed, ())


def test_jobs_cover_every_deck_once_in_fixed_chunks() -> None:
    spec = RunSpec("standard", 45_001, 120_000, "j", controls=("naive_swap_any",))
    jobs = jobs_for(spec)
    for source in ("ours", "naive_swap_any"):
        main = [j for j in jobs if j.source == source and not j.small]
        assert sum(j.count for j in main) == 45_001 and main[0].cards == 52
        for n in (3, 4, 5):
            small = [j for j in jobs if j.source == source and j.small and j.cards == n]
            assert sum(j.count for j in small) == 120_000
    assert {j.count for j in jobs if j.source == "ours" and not j.small} == {CHUNK["ours"], 5_001}
