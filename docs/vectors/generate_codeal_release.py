"""Generate fairdeck-codeal-release-v1.json: the seat's release of a hand (docs/codealing-spec.md 9.3).

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_codeal_release.py           # (re)write the file
    python docs/vectors/generate_codeal_release.py --check   # exit 1 if it differs from what this makes

Deterministic: every secret, share and ephemeral key comes from SHAKE-256 of a fixed label. Each
seal is one co-dealer's sealed share with the SHA-256 of its release token, as the co-dealer
records it when it seals; each case is one seat device asked for the release of one seal, with the
line it gives ("OK: release HEX" or "FAILED at step STEP: DETAIL"), the token section 9.3's
formula gives for the case's inputs whether or not the seal opens, and whether that token's
SHA-256 is the co-dealer's digest. Vectors of a published version never change: add a file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.seal import derive_release, seal_share_released, seat_public_key, seat_release
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u64

OUTPUT = Path(__file__).with_name("fairdeck-codeal-release-v1.json")
Vector = dict[str, Any]

FORMAT = (
    "seats: NAME -> X25519 secret key (hex). seals: NAME -> {deck, hand_id, position, holder, seat, "
    "sealed (176 bytes, hex), release_sha256 (what the co-dealer recorded, hex)}. cases: {name, "
    "seal, deck, hand_id, position, holder, seat (the device's inputs), line, release (section 9.3's "
    "token for these inputs and the seal's epk, hex), matches (its SHA-256 is the seal's "
    "release_sha256)}. line: 'OK: release HEX' or 'FAILED at step STEP: DETAIL'."
)


def drbg(label: str) -> Callable[[int], bytes]:
    counter = 0

    def read(n: int) -> bytes:
        nonlocal counter
        counter += 1
        data = b"fairdeck codeal release vectors\n" + label.encode() + u64(counter)
        return hashlib.shake_256(data).digest(n)

    return read


SEATS = {name: drbg(f"seat {name}")(32).hex() for name in ("alice", "bob")}
SEALS = {  # name -> (deck, hand_id, position, holder, seat)
    "alice p0 k1": ("short", "release-vector-1", 0, 1, "alice"),
    "bob p5 k2": ("standard", "release-vector-2", 5, 2, "bob"),
}


def make_seals() -> dict[str, Vector]:
    out = {}
    for name, (deck, hand_id, p, k, seat) in SEALS.items():
        random = drbg(f"seal {name}")
        share = random(128)  # the bytes sealed do not enter the release: any 128 bytes show it
        seat_pk = seat_public_key(bytes.fromhex(SEATS[seat]))
        sealed, token = seal_share_released(DeckSpec.parse(deck), hand_id, p, k, share, seat_pk, random)
        out[name] = {
            "deck": deck,
            "hand_id": hand_id,
            "position": p,
            "holder": k,
            "seat": seat,
            "sealed": sealed.hex(),
            "release_sha256": hashlib.sha256(token).hexdigest(),
        }
    return out


def case(seals: dict[str, Vector], name: str, seal: str, **changes: Any) -> Vector:
    s = seals[seal]
    inputs = {k: s[k] for k in ("deck", "hand_id", "position", "holder", "seat")} | changes
    spec = DeckSpec.parse(inputs["deck"])
    sealed, secret = bytes.fromhex(s["sealed"]), bytes.fromhex(SEATS[inputs["seat"]])
    args = (spec, inputs["hand_id"], inputs["position"], inputs["holder"])
    try:
        line = f"OK: release {seat_release(*args, sealed, secret).hex()}"
    except CodealError as e:
        line = f"FAILED at step {e.step}: {e.detail}"
    token = derive_release(*args, sealed[:32], secret)
    matches = hashlib.sha256(token).hexdigest() == s["release_sha256"]
    return {"name": name, "seal": seal, **inputs, "line": line, "release": token.hex(), "matches": matches}


def build() -> Vector:
    seals = make_seals()
    cases = [
        case(seals, "valid: alice's release of co-dealer 1's seal of position 0", "alice p0 k1"),
        case(seals, "valid: bob's release of co-dealer 2's seal of position 5", "bob p5 k2"),
        case(seals, "invalid: another seat's key", "alice p0 k1", seat="bob"),
        case(seals, "invalid: another position in the info", "alice p0 k1", position=1),
        case(seals, "invalid: another hand in the info", "alice p0 k1", hand_id="release-vector-2"),
        case(seals, "invalid: another holder in the info", "bob p5 k2", holder=1),
        case(seals, "invalid: another deck in the info", "bob p5 k2", deck="short"),
    ]
    return {
        "version": "fairdeck-codeal-v1",
        "format": FORMAT,
        "label": "seal release",
        "seats": SEATS,
        "seals": seals,
        "cases": cases,
    }


def main() -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if sys.argv[1:] == ["--check"]:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} differs from what this generator makes", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
