"""The JavaScript co-dealt verifier (client/web/src/codeal/, written from docs/codealing-spec.md)
against the Python reference, on every vector of docs/vectors/fairdeck-codeal-v1.json: the same
line (verdict, step and words) on Node and inside the page in headless Chromium and Firefox; and a
hand proof carrying a co-dealt record of other cards than it deals, which the page refuses at step
open (no hand proof format yet lets a co-dealt deal pass the ordinary deck check too).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fairdeck.codeal import CodealError, verify_hand
from fairdeck.codeal.seal import open_sealed_share
from fairdeck.core.decks import DeckSpec
from tests.codeal.support import table
from tests.codeal.test_vectors import VECTORS, as_hand, edited
from tests.web import browser
from tests.web.test_page_vectors import PROOFS_V2

CODEAL_VECTORS = browser.VECTORS / "fairdeck-codeal-v1.json"
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


def test_node_gives_the_python_line_on_every_codeal_vector(python: dict[str, Any]) -> None:
    browser.require(browser.node_missing())
    done = subprocess.run(
        ["node", "test/codeal-lines.mjs", str(CODEAL_VECTORS)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same(json.loads(done.stdout), python)


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


def test_node_gives_the_python_line_on_a_flipped_bit_anywhere(tmp_path: Path) -> None:
    """Beyond the vectors: the batched checks of the JavaScript reject what the reference rejects,
    at the same step and in the same words, wherever one bit of a hand is flipped."""
    browser.require(browser.node_missing())
    cases = flipped_bit_cases(40, seed=36)
    path = tmp_path / "flips.json"
    path.write_text(json.dumps({**VECTORS, "cases": cases}), encoding="utf-8")
    done = subprocess.run(
        ["node", "test/codeal-lines.mjs", str(path)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)["cases"]
    want = {c["name"]: python_line(edited(c)) for c in cases}
    assert got == want
    assert not [name for name, line in want.items() if line.startswith("OK")], "a flipped bit was accepted"


def test_shares_and_opening_are_checked_position_by_position(tmp_path: Path) -> None:
    """Spec section 10, steps 5 and 6: the first position's wrong card is found before the second
    position's bad share (a verifier that checked every share first would say "share")."""
    browser.require(browser.node_missing())
    hand = VECTORS["hands"]["short-2"]
    bad_z = bytes.fromhex(hand["dealt"][1]["shares"][0])[96:97].hex()
    flip = "%02x" % (int(bad_z, 16) ^ 1)
    case = {
        "name": "wrong card at 0, bad share at 1",
        "base": "short-2",
        "edits": [
            {"op": "card", "index": 0, "card": next(c for c in range(52) if c != hand["dealt"][0]["card"])},
            {"op": "overwrite", "field": "dealt", "index": 1, "share": 0, "offset": 96, "hex": flip},
        ],
        "valid": False,
        "step": "open",
    }
    path = tmp_path / "order.json"
    path.write_text(json.dumps({**VECTORS, "cases": [case]}), encoding="utf-8")
    done = subprocess.run(
        ["node", "test/codeal-lines.mjs", str(path)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = json.loads(done.stdout)["cases"][case["name"]]
    assert line == python_line(edited(case))
    assert line.startswith("FAILED at step open: position "), line


def test_the_package_test_runner_passes_on_node() -> None:
    browser.require(browser.node_missing())
    done = subprocess.run(
        ["node", "--test", "test/codeal.test.mjs"],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def codeal_proof(name: str = "a standard hand", positions: int = 23) -> str:
    """A format-2 hand proof of docs/vectors with a "codeal" object (spec section 11) for its hand."""
    proof = json.loads(next(v["text"] for v in PROOFS_V2["valid"] if v["name"] == name))
    spec = DeckSpec.parse(proof["transcript"]["deck"])
    holders = table(spec.name, proof["transcript"]["hand_id"], holders=2, seed=36)
    hand = holders.shuffle_all().hand(range(positions))
    verify_hand(hand)
    proof["codeal"] = {
        "version": "fairdeck-codeal-v1",
        "keys": [k.hex() for k in hand.keys],
        "shuffles": [s.hex() for s in hand.shuffles],
        "dealt": [
            {
                "position": d.position,
                "card": spec.card_for_id(d.card).code,
                "shares": [s.hex() for s in d.shares],
            }
            for d in hand.dealt
        ],
        "seeds": [s.hex() for s in hand.seeds or ()],
    }
    return json.dumps(proof, indent=2)


def test_a_codeal_object_of_other_cards_than_the_proof_deals_is_refused(tmp_path: Path) -> None:
    """The bug: the page checked the codeal object on its own and said nobody could have read the
    player's cards, while the cards the proof shows (its dealt, from the ordinary deck the dealer
    derived alone) were not the cards the co-dealt record opens. Now step open says so."""
    browser.require(browser.node_missing())
    text = codeal_proof(positions=len(json.loads(codeal_proof())["dealt"]))
    proof = json.loads(text)
    job = [{"id": "unrelated", "bytes_b64": browser.b64(text.encode()), "key": PROOFS_V2["log_key"]}]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        ["node", "test/lines.mjs", str(path)], cwd=browser.WEB, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first = proof["codeal"]["dealt"][0]
    assert first["position"] == 0 and first["card"] != proof["dealt"][0]
    assert json.loads(done.stdout)["unrelated"] == (
        f"FAILED at step open: position 0: the hand proof deals {proof['dealt'][0]} there, "
        f"the shares open {first['card']}"
    )


def flipped_share(text: str) -> str:
    """The proof with one bit of the first dealt card's co-dealer share flipped (its z)."""
    proof = json.loads(text)
    share = bytearray.fromhex(proof["codeal"]["dealt"][0]["shares"][1])
    share[100] ^= 1
    proof["codeal"]["dealt"][0]["shares"][1] = share.hex()
    return json.dumps(proof, indent=2)


@pytest.fixture(scope="module", params=browser.ENGINES)
def page_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    tmp = tmp_path_factory.mktemp(f"codeal-{engine}")
    good = codeal_proof()
    files = {"good": good, "bad share": flipped_share(good)}
    ui = []
    for name, text in files.items():
        path = tmp / f"{name.replace(' ', '-')}.json"
        path.write_text(text, encoding="utf-8")
        phone = {"width": 390, "height": 844}
        ui.append({"id": name, "file": str(path), "key": PROOFS_V2["log_key"], "viewport": phone})
    job = {
        "codeal_vectors": {"vectors": VECTORS},
        "verify": [
            {"id": n, "bytes_b64": browser.b64(t.encode()), "key": PROOFS_V2["log_key"]}
            for n, t in files.items()
        ],
        "ui": ui,
    }
    return browser.run(job, tmp, engine=engine, timeout=600)


def test_the_page_gives_the_python_line_on_every_codeal_vector(
    page_run: dict[str, Any], python: dict[str, Any]
) -> None:
    assert_same(page_run["codeal_vectors"], python)


def test_the_page_does_not_say_cards_were_co_dealt_when_the_proof_deals_others(
    page_run: dict[str, Any],
) -> None:
    """Every co-dealt check of the record holds, but its cards are not the proof's dealt cards
    (the proof is an ordinary hand's): the page fails at open and claims nothing."""
    r = page_run["verify"]["good"]
    assert (r["ok"], r["step"]) == (False, "open"), r
    assert r["line"].startswith("FAILED at step open: the hand proof deals "), r["line"]
    assert [r["checks"][s] for s in CODEAL_STEPS[:5]] == ["pass"] * 5
    shown = page_run["ui"]["good"]["before"]["codeal"]
    assert shown["hidden"] is True and shown["summary"] == ""


def test_the_page_rejects_a_flipped_bit_in_a_share_and_claims_nothing(page_run: dict[str, Any]) -> None:
    r = page_run["verify"]["bad share"]
    assert (r["ok"], r["step"]) == (False, "share"), r
    assert r["line"].startswith("FAILED at step share: position 0, holder 1: the DLEQ proof fails"), r["line"]
    assert r["checks"]["shuffle"] == "pass" and r["checks"]["open"] == "skip"
    shown = page_run["ui"]["bad share"]["before"]["codeal"]
    assert shown["hidden"] is True and shown["summary"] == ""


def test_the_page_made_no_request_and_raised_no_error(page_run: dict[str, Any]) -> None:
    assert page_run["requests"] == [] and page_run["errors"] == []
