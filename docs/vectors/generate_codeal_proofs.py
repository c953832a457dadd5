"""Generate fairdeck-codeal-proofs-v1.json: known-answer vectors of the co-dealt hand proof,
format 4 of docs/hand-proof.md (a file the SDK makes from a closed co-dealt hand).

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_codeal_proofs.py           # (re)write the file
    python docs/vectors/generate_codeal_proofs.py --check   # exit 1 if the file differs

Deterministic: the holders' secrets, the proof nonces and the co-dealers' Ed25519 identity keys
come from SHAKE-256 of fixed labels. Each case is a file's text, the co-dealer identity keys a
player pins (hex, holder order) and the line ``fairdeck verify --codealer-key ...`` prints for it;
``valid`` ones print OK, each ``invalid`` one names its ``step``. The page and @fairdeck/verifier
print the same line (tests/web/test_codeal_proofs_web.py). Published vectors never change: add.
"""

# ruff: noqa: E501  (the cases below are a table: one case a line)
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.cli.commands import main as fairdeck
from fairdeck.codeal.context import HandContext
from fairdeck.codeal.handfile import CodealerSignatures, CodealHandProof
from fairdeck.codeal.identity import key_statement, shuffle_statement, sign
from fairdeck.codeal.keys import KeyRecord, new_holder
from fairdeck.codeal.local import codeal_local
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u64

OUTPUT = Path(__file__).with_name("fairdeck-codeal-proofs-v1.json")
Case = dict[str, Any]


def drbg(label: str) -> Callable[[int], bytes]:
    """Bytes from SHAKE-256 of a fixed label and a counter: the vectors' only source of randomness."""
    counter = 0

    def read(n: int) -> bytes:
        nonlocal counter
        counter += 1
        return hashlib.shake_256(b"fairdeck codeal proof vectors\n" + label.encode() + u64(counter)).digest(n)

    return read


def identity(name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(drbg(f"identity/{name}")(32))


def proof(
    deck: str, hand_id: str, holders: int, positions: Sequence[int], label: str
) -> tuple[str, list[str]]:
    """A closed hand's format-4 text, signed by co-dealers ``label/1``.., and their keys (hex)."""
    spec = DeckSpec.parse(deck)
    random = drbg(f"hand/{label}")
    secrets = [new_holder(spec, hand_id, k, random) for k in range(holders)]
    hand = codeal_local(deck, hand_id, holders, positions, random, secrets=secrets)
    records = [KeyRecord.decode(k, i) for i, k in enumerate(hand.keys)]
    ctx = HandContext(spec, hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    signatures, keys = [], []
    for k in range(1, holders):
        ident = identity(f"{label}/{k}")
        public = ident.public_key().public_bytes_raw()
        signatures.append(
            CodealerSignatures(
                k,
                public,
                sign(ident, key_statement(spec, hand_id, k, holders, hand.keys[k])),
                sign(ident, shuffle_statement(ctx, hand.shuffles[k])),
            )
        )
        keys.append(public.hex())
    return CodealHandProof(hand, tuple(signatures)).to_json(), keys


def line(text: str, keys: Sequence[str]) -> str:
    """What ``fairdeck verify FILE --codealer-key K...`` prints (its first line)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hand.json"
        path.write_bytes(text.encode("utf-8"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            fairdeck(["verify", str(path), *[f for k in keys for f in ("--codealer-key", k)]])
    return out.getvalue().splitlines()[0]


def edit(text: str, change: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data, indent=1) + "\n"


def flip(hex_text: str, offset: int, bit: int = 0) -> str:
    data = bytearray.fromhex(hex_text)
    data[offset] ^= 1 << bit
    return data.hex()


def build() -> dict[str, Any]:
    seat, seat_keys = proof("standard", "vec-p4-seat", 2, [4, 5], "seat")
    table, table_keys = proof("short", "vec-p4-table", 2, [0, 1, 2, 3, 4], "table")
    three, three_keys = proof("short", "vec-p4-three", 3, [2, 7], "three")
    shoe, shoe_keys = proof("shoe-2", "vec-p4-shoe", 2, [0, 60], "shoe")

    def c(d: dict[str, Any]) -> Any:
        return d["codeal"]

    far = seat.replace('"codeal":', " " * (64 * 1024) + '"codeal":')
    valid = [
        ("a seat's two cards, standard deck", seat, seat_keys),
        ("a short-deck table of five cards", table, table_keys),
        ("three key holders: two co-dealers", three, three_keys),
        ("a two-deck shoe", shoe, shoe_keys),
        ("the codeal object after 64 KiB of white space", far, seat_keys),
        (
            "seeds not yet revealed",
            edit(table, lambda d: c(d).update(seeds=[])),
            table_keys,
        ),
    ]
    other = identity("another co-dealer").public_key().public_bytes_raw().hex()

    def share(i: int, k: int) -> Callable[[dict[str, Any]], None]:
        """Flip one bit of the z of holder k's share of dealt[i] (its proof fails)."""

        def change(d: dict[str, Any]) -> None:
            shares = c(d)["dealt"][i]["shares"]
            shares[k] = flip(shares[k], 96)

        return change

    invalid = [
        ("not JSON", seat[:-3], seat_keys, "format"),
        ("a duplicate name", seat.replace('"deck":', '"deck": "short", "deck":', 1), seat_keys, "format"),
        ("a name too many", edit(seat, lambda d: d.update(log_key="x")), seat_keys, "encoding"),
        ("the codeal object without identities", edit(seat, lambda d: c(d).pop("identities")), seat_keys, "encoding"),
        ("another codeal version", edit(seat, lambda d: c(d).update(version="fairdeck-codeal-v2")), seat_keys, "encoding"),
        ("upper-case hex", edit(seat, lambda d: c(d)["seeds"].__setitem__(0, c(d)["seeds"][0].upper())), seat_keys, "encoding"),
        ("a card of another deck", edit(table, lambda d: c(d)["dealt"][0].update(card="2c")), table_keys, "encoding"),
        ("a malformed card code", edit(seat, lambda d: c(d)["dealt"][0].update(card="10s")), seat_keys, "encoding"),
        ("a card code not canonical for the deck", edit(seat, lambda d: c(d)["dealt"][0].update(card=c(d)["dealt"][0]["card"] + ".1")), seat_keys, "encoding"),
        ("a negative position", edit(seat, lambda d: c(d)["dealt"][0].update(position=-4)), seat_keys, "encoding"),
        ("an unknown deck", edit(seat, lambda d: d.update(deck="pinochle")), seat_keys, "encoding"),
        ("a bad hand id", edit(seat, lambda d: d.update(hand_id="no spaces")), seat_keys, "encoding"),
        ("a short signature", edit(seat, lambda d: c(d)["identities"][0].update(key_signature="00" * 63)), seat_keys, "encoding"),
        ("a co-dealer the player did not pin", seat, [other], "key"),
        ("two keys pinned for one co-dealer", seat, [*seat_keys, other], "key"),
        ("no identity for the co-dealer", edit(seat, lambda d: c(d).update(identities=[])), seat_keys, "key"),
        ("the house's own co-dealer key in the file", edit(seat, lambda d: c(d)["identities"][0].update(key=other)), seat_keys, "key"),
        ("a forged key record signature", edit(seat, lambda d: c(d)["identities"][0].update(key_signature=flip(c(d)["identities"][0]["key_signature"], 0))), seat_keys, "key"),
        ("a forged shuffle record signature", edit(seat, lambda d: c(d)["identities"][0].update(shuffle_signature=flip(c(d)["identities"][0]["shuffle_signature"], 0))), seat_keys, "shuffle"),
        ("the co-dealer's shuffle left out", edit(seat, lambda d: c(d)["shuffles"].pop()), seat_keys, "transcript"),
        ("the co-dealers in the wrong order", edit(three, lambda d: c(d)["identities"].reverse()), three_keys[::-1], "key"),
        ("a forged dealer key record", edit(seat, lambda d: c(d)["keys"].__setitem__(0, flip(c(d)["keys"][0], 64))), seat_keys, "key"),
        ("a dealer shuffle record changed", edit(seat, lambda d: c(d)["shuffles"].__setitem__(0, flip(c(d)["shuffles"][0], 40))), seat_keys, "shuffle"),
        ("a share's proof broken", edit(seat, share(0, 1)), seat_keys, "share"),
        ("the dealer's share broken", edit(table, share(3, 0)), table_keys, "share"),
        ("a card claimed that the shares do not open", edit(table, lambda d: c(d)["dealt"][0].update(card=c(d)["dealt"][1]["card"])), table_keys, "open"),
        ("the seeds swapped", edit(seat, lambda d: c(d)["seeds"].reverse()), seat_keys, "seed"),
        ("one seed missing", edit(table, lambda d: c(d)["seeds"].pop()), table_keys, "seed"),
    ]  # fmt: skip
    cases: dict[str, list[Case]] = {"valid": [], "invalid": []}
    for name, text, keys in valid:
        said = line(text, keys)
        if not said.startswith("OK: "):
            raise SystemExit(f"valid case {name!r}: {said}")
        cases["valid"].append({"name": name, "text": text, "codealer_keys": keys, "line": said})
    for name, text, keys, step in invalid:
        said = line(text, keys)
        if not said.startswith(f"FAILED at step {step}: "):
            raise SystemExit(f"invalid case {name!r}: want step {step}, got {said}")
        cases["invalid"].append(
            {"name": name, "text": text, "codealer_keys": keys, "step": step, "line": said}
        )
    return {
        "description": "Co-dealt hand proofs (docs/hand-proof.md, format 4): each case's text, the co-dealer "
        "identity keys pinned (hex, holder order) and the line fairdeck verify prints; made by "
        "docs/vectors/generate_codeal_proofs.py",
        **cases,
    }


def main(argv: Sequence[str]) -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in argv:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(
                f"{OUTPUT.name} is stale: run python docs/vectors/generate_codeal_proofs.py", file=sys.stderr
            )
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
