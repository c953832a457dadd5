"""docs/vectors/fairdeck-codeal-v1.json: every vector, read the way an outsider's harness would.

The edits of a case are applied here from the file's own description (not with the generator's
code), each hand is verified, and an invalid one must be rejected at exactly the step it names.
The file must be what docs/vectors/generate_codeal.py writes.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.codeal import CodealError, CodealHand, DealtPosition, verify_hand
from fairdeck.codeal.elgamal import card_point, generators
from fairdeck.codeal.group import hash_to_point
from fairdeck.codeal.seal import open_sealed_share
from fairdeck.codeal.shuffle import permutation, randomness, seed_commitment, shuffler_client_seed
from fairdeck.core.decks import DeckSpec

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-codeal-v1.json").read_text())


def as_hand(v: dict[str, Any]) -> CodealHand:
    return CodealHand(
        v["deck"],
        v["hand_id"],
        tuple(bytes.fromhex(k) for k in v["keys"]),
        tuple(bytes.fromhex(s) for s in v["shuffles"]),
        tuple(
            DealtPosition(d["position"], d["card"], tuple(bytes.fromhex(s) for s in d["shares"]))
            for d in v["dealt"]
        ),
        None if v["seeds"] is None else tuple(bytes.fromhex(s) for s in v["seeds"]),
    )


def edited(case: dict[str, Any]) -> dict[str, Any]:
    hand: dict[str, Any] = copy.deepcopy(VECTORS["hands"][case["base"]])
    for e in case["edits"]:
        op, field = e["op"], e.get("field")
        if op == "set":
            hand[field] = e["value"]
        elif op == "take":
            hand[field] = [hand[field][i] for i in e["indices"]]
        elif op == "from":
            hand[field] = VECTORS["hands"][e["hand"]][field]
        elif op in ("overwrite", "cut"):
            where = hand[field][e["index"]]["shares"] if field == "dealt" else hand[field]
            key = e["share"] if field == "dealt" else e["index"]
            data = bytearray.fromhex(where[key])
            if op == "overwrite":
                new = bytes.fromhex(e["hex"])
                data[e["offset"] : e["offset"] + len(new)] = new
            else:
                del data[e["offset"] : e["offset"] + e["length"]]
            where[key] = data.hex()
        elif op == "shares":
            d = hand["dealt"][e["index"]]
            d["shares"] = [d["shares"][i] for i in e["indices"]]
        elif op == "card":
            hand["dealt"][e["index"]]["card"] = e["card"]
        else:
            raise AssertionError(f"unknown edit {op}")
    return hand


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
