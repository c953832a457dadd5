"""The player's page in a real iframe of a game's page, in headless Chromium and Firefox: the game's
window drives the frame's window.fairdeck with byte arrays of its own window (another realm, for
which ``instanceof Uint8Array`` in the frame is false). The page refused such honest bytes at step
encoding in verifyCodealHand (decodePoint, the key records), the seat's checks of the seals and the
co-dealt vectors. The game page is a file whose frame holds the verifier page as its srcdoc (same
origin, as a game that serves the page beside its own); the material is the reference's co-dealt
hands (docs/vectors: fairdeck-codeal-v1, -seal-v1, -seat-releases-v1, -proofs-v1), no dealer."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser, node_runs
from tests.support.codeal_proof_vectors import PROOFS

SEALS = json.loads((browser.VECTORS / "fairdeck-codeal-seal-v1.json").read_text(encoding="utf-8"))
RELEASES = json.loads((browser.VECTORS / "fairdeck-codeal-seat-releases-v1.json").read_text(encoding="utf-8"))
CODEAL = json.loads((browser.VECTORS / "fairdeck-codeal-v1.json").read_text(encoding="utf-8"))
CARDS = [next(c for c in SEALS["cases"] if c["name"] == f"valid, position {p}") for p in (0, 1)]
BOTH = next(c for c in RELEASES["cases"] if c["name"] == "valid: two holders, positions 0 and 1")
VERIFIER_TITLE = "fairdeck: check your own hand"
REFUSED_PROOFS = {"a share's proof broken", "a co-dealer the player did not pin"}
VALID_PROOFS = {"a seat's two cards, standard deck", "seeds not yet revealed"}
# The file's bytes are the game's: one case of each verdict is enough here (the whole file of
# proofs runs in the page on its own in test_codeal_proofs_web.py).
PROOF_CASES = [
    *(c for c in PROOFS["valid"] if c["name"] in VALID_PROOFS),
    *(c for c in PROOFS["invalid"] if c["name"] in REFUSED_PROOFS),
]


def game_page(where: Path) -> Path:
    """A game's page with the verifier page in <iframe id="verifier">, as its srcdoc."""
    page = browser.PAGE.read_text(encoding="utf-8")
    path = where / "game.html"
    path.write_text(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>A card game</title></head>\n'
        "<body><h1>A card game</h1>\n"
        f'<iframe id="verifier" title="Your cards" width="400" height="800" srcdoc="{html.escape(page)}">'
        "</iframe>\n</body></html>\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module", params=browser.ENGINES)
def frame_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    first = CARDS[0]
    job = {
        "frame_cases": {
            "seat": {
                "hand": SEALS["hands"][first["hand"]],
                "cards": CARDS,
                "seat_secret": SEALS["seat_secret"],
                "identity_keys": first["identity_keys"],
            },
            "seal_vectors": SEALS,
            "release_vectors": RELEASES,
            "codeal_vectors": CODEAL,
            "proofs": [{k: c[k] for k in ("name", "text", "codealer_keys")} for c in PROOF_CASES],
        }
    }
    page = game_page(tmp_path_factory.mktemp(f"game-{engine}"))
    return browser.run_shared(job, tmp_path_factory, page=page, engine=engine, timeout=600)


def test_the_frame_is_another_realm_of_the_same_origin(frame_run: dict[str, Any]) -> None:
    """The case is real: the game's Uint8Array is not the frame's, yet the game may call the page."""
    realms = frame_run["frame_cases"]["realms"]
    assert realms["frame_address"] == "about:srcdoc" and realms["frame_title"] == VERIFIER_TITLE
    assert (realms["own_uint8array"], realms["instanceof_there"]) == (False, False)


def test_the_pages_seat_opens_and_releases_a_hand_given_the_games_arrays(frame_run: dict[str, Any]) -> None:
    seat = frame_run["frame_cases"]["seat"]
    assert seat["public_key"] == SEALS["seat_public_key"]
    assert seat["opened"] == "8s 7d" and seat["shown"] == "8\u26607\u2666"
    assert seat["status"].startswith("Released: your play is over. 2 release tokens went to the game")
    assert seat["released"] == BOTH["line"]


def test_the_pages_seat_still_refuses_text_where_bytes_are_expected(frame_run: dict[str, Any]) -> None:
    refused = frame_run["frame_cases"]["seat"]["refused"]
    assert refused == {
        "secret_as_hex": "FAILED at step encoding: secretKey: want bytes (a Uint8Array), not string",
        "secret_as_numbers": "FAILED at step encoding: secretKey: want bytes (a Uint8Array), not array",
        "share_as_hex": "FAILED at step encoding: position 0 share 0: want bytes (a Uint8Array), not string",
    }


def test_the_seal_and_release_vectors_give_the_reference_line_from_the_games_window(
    frame_run: dict[str, Any],
) -> None:
    assert frame_run["frame_cases"]["seal_vectors"] == {c["name"]: c["line"] for c in SEALS["cases"]}
    assert frame_run["frame_cases"]["seat_releases"] == {c["name"]: c["line"] for c in RELEASES["cases"]}


def test_verify_codeal_hand_gives_the_same_line_for_the_games_arrays_as_for_its_own(
    frame_run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every hand and case of fairdeck-codeal-v1, the sealed shares and the seat side alike, as Node
    gives them on the package's own arrays (client/web's test run, once a session; test_codeal_web.py
    holds those lines to the Python reference)."""
    game = frame_run["frame_cases"]["codeal_game"]
    assert game == node_runs.package_run(tmp_path_factory).lines("codeal")
    assert all(line.startswith("OK: co-dealt hand ") for line in game["hands"].values()), game["hands"]
    for c in CODEAL["cases"]:
        want = "OK: " if c["valid"] else f"FAILED at step {c['step']}: "
        assert game["cases"][c["name"]].startswith(want), (c["name"], game["cases"][c["name"]])
    assert [s["step"] for s in game["seals"]] == [s["step"] for s in CODEAL["seals"]]


def test_verify_codeal_hand_still_refuses_key_records_given_as_text_or_numbers(
    frame_run: dict[str, Any],
) -> None:
    refused = frame_run["frame_cases"]["codeal_refused"]
    line = "FAILED at step encoding: key record 0: 128 bytes"
    assert refused == {"as_hex": line, "as_numbers": line}


def test_a_proof_file_in_the_games_bytes_gives_fairdeck_verifys_line(frame_run: dict[str, Any]) -> None:
    assert frame_run["frame_cases"]["proofs"] == {c["name"]: c["line"] for c in PROOF_CASES}


def test_the_game_and_its_frame_made_no_request_and_raised_no_error(frame_run: dict[str, Any]) -> None:
    assert frame_run["requests"] == [] and frame_run["errors"] == []
