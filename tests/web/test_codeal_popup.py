"""The player's page opened by a game's page as a window of its own (``window.open``), in headless
Chromium and Firefox: the other embedding a game may use besides the iframe (test_codeal_iframe.py),
where its table leaves no room for a frame. The game's window drives the opened window's
window.fairdeck with byte arrays of its own realm; the player releases the seat in the page's window,
and the game's onrelease gets the tokens, the page's arrays, which the game's own Blob reads as they
are. Bytes in any form but a Uint8Array (a list of numbers, an Int8Array, a Uint8ClampedArray, which
the seat once copied in) are refused in the seat's words. A file: page is an origin of its own in
both engines, so the game writes the page's text into the window it opened (about:blank, of the
game's origin; frame-cases.mjs's runPopupCases), as the frame test uses srcdoc. The material is the
reference's seal and seat-release vectors (docs/vectors), no dealer."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser

SEALS = json.loads((browser.VECTORS / "fairdeck-codeal-seal-v1.json").read_text(encoding="utf-8"))
RELEASES = json.loads((browser.VECTORS / "fairdeck-codeal-seat-releases-v1.json").read_text(encoding="utf-8"))
CARDS = [next(c for c in SEALS["cases"] if c["name"] == f"valid, position {p}") for p in (0, 1)]
BOTH = next(c for c in RELEASES["cases"] if c["name"] == "valid: two holders, positions 0 and 1")
VERIFIER_TITLE = "fairdeck: check your own hand"
REFUSED = "FAILED at step encoding: "


def game_page(where: Path) -> Path:
    """A game's page holding the verifier page's text in <textarea id="verifier-page">, which it
    writes into the window it opens."""
    page = browser.PAGE.read_text(encoding="utf-8")
    path = where / "game.html"
    path.write_text(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>A card game</title></head>\n'
        "<body><h1>A card game</h1>\n"
        f'<textarea id="verifier-page" hidden>{html.escape(page)}</textarea>\n</body></html>\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module", params=browser.ENGINES)
def popup_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    job = {
        "frame_cases": {
            "popup": True,
            "seat": {
                "hand": SEALS["hands"][CARDS[0]["hand"]],
                "cards": CARDS,
                "seat_secret": SEALS["seat_secret"],
                "identity_keys": CARDS[0]["identity_keys"],
            },
            "seal_vectors": SEALS,
            "release_vectors": RELEASES,
        }
    }
    page = game_page(tmp_path_factory.mktemp(f"popup-game-{engine}"))
    return browser.run_shared(job, tmp_path_factory, page=page, engine=engine, timeout=300)


def test_the_opened_window_is_a_top_window_of_another_realm_and_the_same_origin(
    popup_run: dict[str, Any],
) -> None:
    realms = popup_run["frame_cases"]["realms"]
    assert realms == {
        "own_uint8array": False,
        "instanceof_there": False,
        "top": True,
        "opener": True,
        "title": VERIFIER_TITLE,
    }


def test_the_pages_seat_in_its_own_window_opens_and_releases_a_hand_given_the_games_arrays(
    popup_run: dict[str, Any],
) -> None:
    seat = popup_run["frame_cases"]["seat"]
    assert seat["public_key"] == SEALS["seat_public_key"]
    assert seat["opened"] == "8s 7d" and seat["shown"] == "8\u26607\u2666"
    assert seat["status"].startswith("Released: your play is over. 2 release tokens went to the game")
    assert seat["released"] == BOTH["line"]


def test_the_game_sends_the_tokens_it_got_from_the_pages_window_as_they_are(
    popup_run: dict[str, Any],
) -> None:
    """The tokens are the page's arrays (another realm for the game: client/web/README.md says so);
    a Blob of the game's, as the README's example sends them, reads their bytes unchanged."""
    seat = popup_run["frame_cases"]["seat"]
    tokens = BOTH["line"].removeprefix("OK: releases ").split()
    assert seat["tokens_are_the_games"] == [False] * len(tokens)
    assert seat["sent"] == "".join(tokens)


def test_the_pages_seat_refuses_lists_and_other_typed_arrays_as_bytes(popup_run: dict[str, Any]) -> None:
    """Each of these was copied in as bytes before: the seat was the one lenient corner of the page."""
    assert popup_run["frame_cases"]["seat"]["refused"] == {
        "secret_as_numbers": REFUSED + "secretKey: want bytes (a Uint8Array), not array",
        "key_as_int8array": REFUSED + "key record 0: want bytes (a Uint8Array), not Int8Array",
        "identity_key_as_clamped": REFUSED
        + "identity key of holder 1: want bytes (a Uint8Array), not Uint8ClampedArray",
        "share_as_numbers": REFUSED + "position 0 share 0: want bytes (a Uint8Array), not array",
        "release_of_numbers": REFUSED + "seal: a sealed share is 176 bytes",
    }


def test_the_seal_and_release_vectors_give_the_reference_line_in_the_opened_window(
    popup_run: dict[str, Any],
) -> None:
    assert popup_run["frame_cases"]["seal_vectors"] == {c["name"]: c["line"] for c in SEALS["cases"]}
    assert popup_run["frame_cases"]["seat_releases"] == {c["name"]: c["line"] for c in RELEASES["cases"]}


def test_the_page_refuses_to_frame_the_game(popup_run: dict[str, Any]) -> None:
    """The other way round is not an embedding: a frame of a game put into the page is refused by
    the page's Content-Security-Policy (default-src 'none', so frame-src 'none'). The game is a
    data: address: Firefox lets a file: page frame a file: address despite the policy, a case of
    this test's file: pages only."""
    assert popup_run["frame_cases"]["game_framed"] == ["frame-src"]


def test_the_game_and_the_window_it_opened_made_no_request_and_raised_no_error(
    popup_run: dict[str, Any],
) -> None:
    """The driver hears the game's page (and, in Chromium, the requests of every window it opens);
    the page's own errors are caught in its window (runPopupCases)."""
    assert popup_run["requests"] == [] and popup_run["errors"] == []
    assert popup_run["frame_cases"]["errors"] == []
