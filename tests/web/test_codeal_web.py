"""The JavaScript co-dealt verifier (client/web/src/codeal/, written from docs/codealing-spec.md)
against the Python reference, on every vector of docs/vectors/fairdeck-codeal-v1.json (the records
of section 10): the same line (verdict, step and words) on Node and inside the page in headless
Chromium and Firefox; and the old in-format-1-to-3 "codeal" object, refused at step format as
`fairdeck verify` refuses it. A co-dealt hand's proof, format 4: test_codeal_proofs_web.py.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.codeal import CodealError, verify_hand
from fairdeck.codeal.seal import open_sealed_share
from fairdeck.core.decks import DeckSpec
from tests.support import browser, node_runs
from tests.support.codeal_vectors import VECTORS, as_hand, edited
from tests.support.env import clean_env
from tests.support.page_vectors import PROOFS_V2

# One worker runs the module: its page runs (one per engine) and Python results are built once.
pytestmark = pytest.mark.xdist_group("test_codeal_web")

CODEAL_STEPS = ["encoding", "key", "transcript", "shuffle", "share", "open", "seed"]


def python_line(v: dict[str, Any]) -> str:
    """The reference's verdict on a hand in the vectors' form, worded as the JavaScript words it."""
    hand = as_hand(v)
    try:
        verify_hand(hand)
    except CodealError as e:
        return f"FAILED at step {e.step}: {e.detail}"
    seeds = "seeds not revealed yet" if hand.seeds is None else "the seeds re-derive every shuffle"
    return (
        f"OK: co-dealt hand {hand.hand_id} verified ({hand.deck}, {len(hand.keys)} key holders, "
        f"{len(hand.dealt)} cards opened, {seeds})"
    )


def python_results() -> dict[str, Any]:
    seals = []
    for s in VECTORS["seals"]:
        try:
            share = open_sealed_share(
                DeckSpec.parse(s["deck"]),
                s["hand_id"],
                s["position"],
                s["holder"],
                bytes.fromhex(s["sealed"]),
                bytes.fromhex(s["seat_secret"]),
            )
            seals.append({"share": share.hex(), "step": None})
        except CodealError as e:
            seals.append({"share": None, "step": e.step, "detail": e.detail})
    return {
        "hands": {name: python_line(v) for name, v in VECTORS["hands"].items()},
        "cases": {c["name"]: python_line(edited(c)) for c in VECTORS["cases"]},
        "seals": seals,
    }


@pytest.fixture(scope="module")
def python() -> dict[str, Any]:
    return python_results()


def assert_same(got: dict[str, Any], python: dict[str, Any]) -> None:
    assert got["hands"] == python["hands"]
    for c in VECTORS["cases"]:
        line = got["cases"][c["name"]]
        assert line == python["cases"][c["name"]], c["name"]
        want = "OK: " if c["valid"] else f"FAILED at step {c['step']}: "
        assert line.startswith(want), line
    assert got["seals"] == python["seals"]
    assert got["points"] is True
    assert got["seat"] == {"key": True, "mine": True, "every": True}, "the seat side"
    assert len(got["derivations"]) == len(VECTORS["derivations"])
    assert all(all(d.values()) for d in got["derivations"])


def test_node_gives_the_python_line_on_every_codeal_vector(
    python: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The lines of client/web's own test runner, which computes them once a session."""
    assert_same(node_runs.package_run(tmp_path_factory).lines("codeal"), python)


def flipped_bit_cases(count: int, seed: int) -> list[dict[str, Any]]:
    """Cases of the vectors' form: one bit of the short-2 hand flipped, anywhere in its bytes."""
    rng = random.Random(seed)
    hand = VECTORS["hands"]["short-2"]
    cases = []
    for n in range(count):
        field = rng.choice(["keys", "shuffles", "dealt", "seeds"])
        edit: dict[str, Any] = {"op": "overwrite", "field": field, "index": rng.randrange(len(hand[field]))}
        if field == "dealt":
            edit["share"] = rng.randrange(2)
            data = bytes.fromhex(hand["dealt"][edit["index"]]["shares"][edit["share"]])
        else:
            data = bytes.fromhex(hand[field][edit["index"]])
        edit["offset"] = rng.randrange(len(data))
        edit["hex"] = bytes([data[edit["offset"]] ^ (1 << rng.randrange(8))]).hex()
        cases.append({"name": f"flip {n}", "base": "short-2", "edits": [edit], "valid": False, "step": None})
    return cases


ORDER_CASE = "wrong card at 0, bad share at 1"


def order_case() -> dict[str, Any]:
    """Spec section 10, steps 5 and 6: the short-2 hand with a wrong card at its first position and
    a bad share (one bit of its z) at its second."""
    hand = VECTORS["hands"]["short-2"]
    bad_z = bytes.fromhex(hand["dealt"][1]["shares"][0])[96:97].hex()
    flip = "%02x" % (int(bad_z, 16) ^ 1)
    return {
        "name": ORDER_CASE,
        "base": "short-2",
        "edits": [
            {"op": "card", "index": 0, "card": next(c for c in range(52) if c != hand["dealt"][0]["card"])},
            {"op": "overwrite", "field": "dealt", "index": 1, "share": 0, "offset": 96, "hex": flip},
        ],
        "valid": False,
        "step": "open",
    }


FLIPS = flipped_bit_cases(40, seed=36)


@pytest.fixture(scope="module")
def node_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The JavaScript's line on every flipped-bit case and on the order case, in one node run of
    test/codeal-lines.mjs. The cases edit only short-2, so the file holds that hand and the one its
    sealed vector names (the seat side needs it): the run does not verify the other hands again."""
    browser.require(browser.node_missing())
    sealed = {s["hand_id"] for s in VECTORS["seals"] if s["step"] is None}
    hands = {n: h for n, h in VECTORS["hands"].items() if n == "short-2" or h["hand_id"] in sealed}
    path = tmp_path_factory.mktemp("codeal-cases") / "cases.json"
    job = {**VECTORS, "hands": hands, "cases": [*FLIPS, order_case()]}
    path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        ["node", "test/codeal-lines.mjs", str(path)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cases: dict[str, str] = json.loads(done.stdout)["cases"]
    return cases


def test_node_gives_the_python_line_on_a_flipped_bit_anywhere(node_cases: dict[str, str]) -> None:
    """Beyond the vectors: the batched checks of the JavaScript reject what the reference rejects,
    at the same step and in the same words, wherever one bit of a hand is flipped."""
    want = {c["name"]: python_line(edited(c)) for c in FLIPS}
    assert {name: node_cases[name] for name in want} == want
    assert not [name for name, line in want.items() if line.startswith("OK")], "a flipped bit was accepted"


def test_shares_and_opening_are_checked_position_by_position(node_cases: dict[str, str]) -> None:
    """Spec section 10, steps 5 and 6: the first position's wrong card is found before the second
    position's bad share (a verifier that checked every share first would say "share")."""
    line = node_cases[ORDER_CASE]
    assert line == python_line(edited(order_case()))
    assert line.startswith("FAILED at step open: position "), line


def test_the_package_test_runner_passes_on_node(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = node_runs.package_run(tmp_path_factory)
    assert run.returncode == 0, run.output[-3000:]


def test_a_codeal_object_in_a_hand_proof_of_format_1_to_3_is_refused_as_fairdeck_verify_refuses_it(
    tmp_path: Path,
) -> None:
    """The old shape (a "codeal" object beside a format-2 proof's transcript, docs/codealing-spec.md
    section 11 before format 4) passes no verifier: the page and @fairdeck/verifier refuse it at step
    format, in the words of `fairdeck verify`. A co-dealt hand's proof is format 4
    (tests/web/test_codeal_proofs_web.py)."""
    browser.require(browser.node_missing())
    proof = json.loads(next(v["text"] for v in PROOFS_V2["valid"] if v["name"] == "a standard hand"))
    proof["codeal"] = {"version": "fairdeck-codeal-v1", "keys": [], "shuffles": [], "dealt": [], "seeds": []}
    text = json.dumps(proof, indent=2)
    path = tmp_path / "old.json"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", str(path), "--key", PROOFS_V2["log_key"]],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    job = [{"id": "old", "bytes_b64": browser.b64(text.encode()), "key": PROOFS_V2["log_key"]}]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    node = subprocess.run(
        ["node", "test/lines.mjs", str(path)], cwd=browser.WEB, capture_output=True, text=True, timeout=600
    )
    assert node.returncode == 0, node.stderr[-3000:]
    line = json.loads(node.stdout)["old"]
    assert line == done.stdout.strip()
    assert line.startswith("FAILED at step format: a hand proof of format 2 has exactly the names"), line


@pytest.fixture(scope="module", params=browser.ENGINES)
def page_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    job = {"codeal_vectors": {"vectors": VECTORS}}
    return browser.run_shared(job, tmp_path_factory, engine=engine, timeout=600)


def test_the_page_gives_the_python_line_on_every_codeal_vector(
    page_run: dict[str, Any], python: dict[str, Any]
) -> None:
    assert_same(page_run["codeal_vectors"], python)


def test_the_page_made_no_request_and_raised_no_error(page_run: dict[str, Any]) -> None:
    assert page_run["requests"] == [] and page_run["errors"] == []
