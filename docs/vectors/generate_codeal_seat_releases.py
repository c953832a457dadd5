"""Generate fairdeck-codeal-seat-releases-v1.json: a seat's release tokens of a whole draw
(docs/codealing-spec.md 9.3), as the SDK's ``seat_releases`` and @fairdeck/verifier's
``seatReleases`` give them: for each sealed card in order, one token per co-dealer share (holders
1..K-1; the dealer's share, holder 0, is not released), each checked to open first.

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_codeal_seat_releases.py           # (re)write the file
    python docs/vectors/generate_codeal_seat_releases.py --check   # exit 1 if it differs

Built on fairdeck-codeal-seal-v1.json's hands and sealed cards (its valid cases), so nothing here is
random. Vectors of a published version never change: add a file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.seal import seat_release
from fairdeck.core.decks import DeckSpec

HERE = Path(__file__).parent
OUTPUT = HERE / "fairdeck-codeal-seat-releases-v1.json"
SEALS = json.loads((HERE / "fairdeck-codeal-seal-v1.json").read_text())
Vector = dict[str, Any]

FORMAT = (
    "seat_secret: the seat's X25519 secret key (hex). cases: {name, deck, hand_id, seat_secret (when "
    "not the file's), sealed_cards: [{position, shares: K sealed shares, hex, holder order}], line}. "
    "line: 'OK: releases HEX HEX ...' (one token per co-dealer share of each card, in order) or "
    "'FAILED at step STEP: DETAIL'."
)
OTHER_SEAT = hashlib.shake_256(b"fairdeck seat releases vectors\nanother seat").hexdigest(32)


def seat_releases_line(deck: str, hand_id: str, cards: list[Vector], secret: str) -> str:
    """The SDK's ``seat_releases`` over the case's inputs, as a line."""
    spec = DeckSpec.parse(deck)
    try:
        tokens = [
            seat_release(spec, hand_id, card["position"], k, bytes.fromhex(sealed), bytes.fromhex(secret))
            for card in cards
            for k, sealed in enumerate(card["shares"])
            if k >= 1
        ]
    except CodealError as e:
        return f"FAILED at step {e.step}: {e.detail}"
    return " ".join(["OK: releases", *(t.hex() for t in tokens)])


def cards_of(names: list[str]) -> list[Vector]:
    by_name = {c["name"]: c for c in SEALS["cases"]}
    return [{"position": by_name[n]["position"], "shares": list(by_name[n]["sealed"])} for n in names]


def flip(hex_text: str, at: int) -> str:
    raw = bytearray(bytes.fromhex(hex_text))
    raw[at] ^= 1
    return raw.hex()


def case(name: str, hand: str, cards: list[Vector], **changes: Any) -> Vector:
    h = SEALS["hands"][hand]
    inputs: Vector = {"deck": h["deck"], "hand_id": h["hand_id"], "sealed_cards": cards} | changes
    secret = inputs.get("seat_secret", SEALS["seat_secret"])
    line = seat_releases_line(inputs["deck"], inputs["hand_id"], inputs["sealed_cards"], secret)
    return {"name": name, **inputs, "line": line}


def build() -> Vector:
    two = cards_of(["valid, position 0", "valid, position 1"])
    three = cards_of(["valid, three holders, position 0", "valid, three holders, position 2"])
    altered = [two[0], {"position": 1, "shares": [two[1]["shares"][0], flip(two[1]["shares"][1], 100)]}]
    dealers = [{"position": 0, "shares": [flip(two[0]["shares"][0], 100), two[0]["shares"][1]]}]
    short = [{"position": 0, "shares": [two[0]["shares"][0], two[0]["shares"][1][:-2]]}]
    cases = [
        case("valid: two holders, positions 0 and 1", "short-2", two),
        case("valid: three holders, positions 0 and 2", "short-3", three),
        case("valid: no sealed card, no token", "short-2", []),
        case("valid: the dealer's own share (holder 0) is not released, nor opened", "short-2", dealers),
        case("invalid: another seat's key", "short-2", two, seat_secret=OTHER_SEAT),
        case("invalid: a co-dealer's sealed share altered", "short-2", altered),
        case("invalid: another hand", "short-2", two, hand_id="seat-releases-other"),
        case("invalid: the cards' positions swapped", "short-3", [{**three[0], "position": 2}, three[1]]),
        case("invalid: a sealed share of 175 bytes", "short-2", short),
    ]
    return {
        "version": SEALS["version"],
        "format": FORMAT,
        "seat_secret": SEALS["seat_secret"],
        "cases": cases,
    }


def main() -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if sys.argv[1:] == ["--check"]:
        if not OUTPUT.is_file() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} differs from what this generator makes", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
