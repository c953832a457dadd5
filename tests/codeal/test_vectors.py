"""docs/vectors/fairdeck-codeal-v1.json: every vector, read the way an outsider's harness would.

The edits of a case are applied here from the file's own description (not with the generator's
code), each hand is verified, and an invalid one must be rejected at exactly the step it names.
The file must be what docs/vectors/generate_codeal.py writes.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from fairdeck.codeal import CodealError, verify_hand
from fairdeck.codeal.elgamal import card_point, generators
from fairdeck.codeal.group import hash_to_point
from fairdeck.codeal.seal import open_sealed_share
from fairdeck.codeal.shuffle import permutation, randomness, seed_commitment, shuffler_client_seed
from fairdeck.core.decks import DeckSpec
from tests.support.codeal_vectors import ROOT, VECTORS, as_hand, edited


@pytest.mark.parametrize("name", sorted(VECTORS["hands"]))
def test_every_vector_hand_verifies(name: str) -> None:
    verify_hand(as_hand(VECTORS["hands"][name]))


def test_the_hold_em_hand_deals_nine_seats_and_a_board() -> None:
    hand = VECTORS["hands"]["holdem-9-seats"]
    assert hand["deck"] == "standard" and len(hand["dealt"]) == 23 and len(hand["keys"]) == 2


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_every_case_is_accepted_or_rejected_at_its_step(case: dict[str, Any]) -> None:
    hand = as_hand(edited(case))
    if case["valid"]:
        verify_hand(hand)
        return
    with pytest.raises(CodealError) as caught:
        verify_hand(hand)
    assert caught.value.step == case["step"]


def test_the_cases_cover_every_step_of_the_verifier() -> None:
    steps = {c["step"] for c in VECTORS["cases"]} | {s["step"] for s in VECTORS["seals"]}
    assert steps == {None, "encoding", "key", "transcript", "shuffle", "share", "open", "seed", "seal"}


@pytest.mark.parametrize("v", VECTORS["seals"], ids=lambda v: f"{v['position']}-{v['step']}")
def test_every_sealed_share_opens_only_for_its_seat_and_place(v: dict[str, Any]) -> None:
    spec, sealed, seat = (
        DeckSpec.parse(v["deck"]),
        bytes.fromhex(v["sealed"]),
        bytes.fromhex(v["seat_secret"]),
    )
    position, holder = v["position"], v["holder"]
    if v["step"] is None:
        assert open_sealed_share(spec, v["hand_id"], position, holder, sealed, seat).hex() == v["share"]
        return
    with pytest.raises(CodealError) as caught:
        open_sealed_share(spec, v["hand_id"], position, holder, sealed, seat)
    assert caught.value.step == v["step"]


def test_card_points_generators_and_hash_to_point() -> None:
    for v in VECTORS["cards"]:
        assert card_point(v["id"]).hex() == v["point"]
    assert [g.hex() for g in generators(52)] == [v["point"] for v in VECTORS["generators"]]
    for v in VECTORS["hash_to_point"]:
        assert hash_to_point(bytes.fromhex(v["msg"]), v["dst"].encode()).hex() == v["point"]
    assert (
        len({v["point"] for v in VECTORS["cards"]} | {v["point"] for v in VECTORS["generators"]}) == 55 + 53
    )


@pytest.mark.parametrize("v", VECTORS["derivations"], ids=lambda v: f"{v['deck']}-{v['k']}")
def test_each_holders_shuffle_is_derived_from_its_seed(v: dict[str, Any]) -> None:
    spec, seed = DeckSpec.parse(v["deck"]), bytes.fromhex(v["seed"])
    assert seed_commitment(spec, v["hand_id"], v["k"], seed).hex() == v["commitment"]
    assert shuffler_client_seed(v["k"]).hex() == v["client_seed"]
    assert list(permutation(spec, v["hand_id"], v["k"], seed)) == v["psi"]
    assert [r.hex() for r in randomness(spec, v["hand_id"], v["k"], seed)] == v["randomness"]


def test_the_file_is_what_the_generator_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "vectors" / "generate_codeal.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
