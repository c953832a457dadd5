"""Generate fairdeck-v1.json, the known-answer vectors of docs/fairness-spec.md (section 11).

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate.py           # (re)write docs/vectors/fairdeck-v1.json
    python docs/vectors/generate.py --check   # exit 1 if the file differs from what this produces

The output is deterministic: every seed is SHAKE-256 of a fixed label, and the
hands where rejection happens are found by trying labels ``.../0``, ``.../1``,
... in order. The answers come from the ``fairdeck`` package; the number of
attempts is counted by replaying the stream of spec section 3.2, and the
script checks that this replay gives the same deck as ``derive_deck``.

Vectors of a published version never change (spec section 9): edit this
script only to add vectors, never to alter existing ones.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fairdeck.commitment import commit
from fairdeck.decks import SPEC_NAMES, DeckSpec
from fairdeck.derivation import Stream, derive_deck
from fairdeck.encoding import lp, u32
from fairdeck.seeds import normalize_client_seeds, server_seed_length
from fairdeck.shuffle import shuffler

VERSION = "fairdeck-v1"
OUTPUT = Path(__file__).with_name("fairdeck-v1.json")
_LABEL_TAG = lp(b"fairdeck-v1 test vectors")

Vector = dict[str, Any]


def label_bytes(label: str, length: int) -> bytes:
    """``length`` bytes determined by ``label``: SHAKE-256(lp(tag) || label)."""
    return hashlib.shake_256(_LABEL_TAG + label.encode("utf-8")).digest(length)


def seed_for(label: str, deck: str) -> bytes:
    """A server seed of the right length for ``deck``, determined by ``label``."""
    return label_bytes("server/" + label, server_seed_length(DeckSpec.parse(deck)))


def replay(deck: str, hand_id: str, server_seed: bytes, client_seeds: Sequence[bytes]) -> tuple[int, int]:
    """(attempts, accepted index) of spec section 4, replayed from the stream."""
    spec = DeckSpec.parse(deck)
    message = (
        lp(deck.encode("ascii"))
        + lp(hand_id.encode("ascii"))
        + lp(server_seed)
        + u32(len(client_seeds))
        + b"".join(lp(seed) for seed in client_seeds)
    )
    stream = Stream(lp(f"{VERSION} stream".encode("ascii")), message)
    shuffle = shuffler(spec.size)
    for attempt in itertools.count(1):
        value = int.from_bytes(stream.read(shuffle.width), "big") & shuffle.mask
        if value < shuffle.limit:
            derived = derive_deck(deck, hand_id, server_seed, client_seeds)
            if shuffle.permute(value, list(spec.card_ids)) != derived:
                raise AssertionError(f"replay of {deck}/{hand_id} disagrees with derive_deck")
            return attempt, value
    raise AssertionError("unreachable")


def valid(
    name: str,
    description: str,
    deck: str,
    hand_id: str,
    server_seed: bytes,
    client_inputs: Sequence[str | bytes] = (),
) -> Vector:
    """A vector that must verify, computed with the fairdeck package."""
    seeds = normalize_client_seeds(client_inputs)
    spec = DeckSpec.parse(deck)
    attempts, index = replay(deck, hand_id, server_seed, seeds)
    cards = derive_deck(deck, hand_id, server_seed, seeds)
    vector: Vector = {
        "name": name,
        "description": description,
        "version": VERSION,
        "deck": deck,
        "hand_id": hand_id,
        "server_seed": server_seed.hex(),
        "client_seeds": [seed.hex() for seed in seeds],
    }
    if any(isinstance(seed, str) for seed in client_inputs):
        vector["client_seed_text"] = [seed if isinstance(seed, str) else None for seed in client_inputs]
    vector.update(
        commitment=commit(deck, hand_id, server_seed).hex(),
        attempts=attempts,
        index=format(index, "x"),
        cards=[spec.card_for_id(card).code for card in cards],
    )
    return vector


def search(
    name: str,
    description: str,
    deck: str,
    hand_id: str,
    wanted: Callable[[int], bool],
    client_inputs: Sequence[str | bytes] = (),
) -> Vector:
    """The first seed of labels ``name/0``, ``name/1``, ... whose attempt count is ``wanted``."""
    seeds = normalize_client_seeds(client_inputs)
    for k in itertools.count():
        server_seed = seed_for(f"{name}/{k}", deck)
        attempts, _ = replay(deck, hand_id, server_seed, seeds)
        if wanted(attempts):
            return valid(name, description, deck, hand_id, server_seed, client_inputs)
    raise AssertionError("unreachable")


def valid_vectors() -> list[Vector]:
    out: list[Vector] = []
    for deck in SPEC_NAMES:
        out.append(
            valid(
                f"{deck}/no-client-seeds",
                f"{deck}: no client seeds",
                deck,
                f"{deck}-hand-1",
                seed_for(f"{deck}/no-client-seeds", deck),
            )
        )
        out.append(
            valid(
                f"{deck}/one-client-seed",
                f"{deck}: one text client seed",
                deck,
                f"{deck}-hand-2",
                seed_for(f"{deck}/one-client-seed", deck),
                ["player-1"],
            )
        )
        out.append(
            search(
                f"{deck}/rejected-once",
                f"{deck}: attempt 0 is rejected, attempt 1 accepted (section 4)",
                deck,
                f"{deck}-hand-3",
                lambda attempts: attempts == 2,
            )
        )

    several: list[str | bytes] = ["alice", "bob", b"\x00\xff", "carol"]
    standard_seed = seed_for("standard/several-client-seeds", "standard")
    out += [
        valid(
            "standard/several-client-seeds",
            "four client seeds, one of them binary",
            "standard",
            "table-7:hand.42_x",
            standard_seed,
            several,
        ),
        valid(
            "standard/several-client-seeds-reordered",
            "the same client seeds in another order: same commitment, different deck",
            "standard",
            "table-7:hand.42_x",
            standard_seed,
            [several[1], several[0], several[2], several[3]],
        ),
        valid(
            "standard/nfc-decomposed",
            "text client seed 'e' + U+0301 COMBINING ACUTE ACCENT: NFC makes it U+00E9, bytes c3a9",
            "standard",
            "nfc-1",
            seed_for("standard/nfc", "standard"),
            ["e\u0301"],
        ),
        valid(
            "standard/nfc-composed",
            "text client seed U+00E9: the same bytes, hence the same deck, as standard/nfc-decomposed",
            "standard",
            "nfc-1",
            seed_for("standard/nfc", "standard"),
            ["\u00e9"],
        ),
        valid(
            "standard/nfc-mixed",
            "NFC composes e + U+0301, maps U+212B ANGSTROM SIGN to U+00C5 and joins Hangul jamo; "
            "a binary seed beside it is left alone",
            "standard",
            "nfc-2",
            seed_for("standard/nfc-mixed", "standard"),
            ["Cafe\u0301 \u212b \u1100\u1161", b"e\xcc\x81"],
        ),
        valid(
            "standard/non-utf8-client-seed",
            "a binary client seed that is not UTF-8 is used as it is",
            "standard",
            "binary-1",
            seed_for("standard/non-utf8-client-seed", "standard"),
            [b"\xff\xfe\x00\x80"],
        ),
        valid(
            "standard/64-client-seeds",
            "the maximum number of client seeds, of 1 to 64 bytes",
            "standard",
            "many-seeds",
            seed_for("standard/64-client-seeds", "standard"),
            [label_bytes(f"client/{i}", i + 1) for i in range(64)],
        ),
        valid(
            "standard/256-byte-client-seed",
            "one client seed of the maximum length, 256 bytes",
            "standard",
            "long-seed",
            seed_for("standard/256-byte-client-seed", "standard"),
            [label_bytes("client/long", 256)],
        ),
        valid(
            "standard/64-character-hand-id",
            "a hand id of the maximum length using every allowed kind of character",
            "standard",
            "Az09._:-" * 8,
            seed_for("standard/64-character-hand-id", "standard"),
            ["x"],
        ),
        valid(
            "standard/zero-server-seed",
            "server seed of 45 zero bytes (never do this outside a test)",
            "standard",
            "h1",
            bytes(45),
        ),
        valid(
            "shoe-1/same-inputs-as-standard",
            "the inputs of standard/zero-server-seed under deck shoe-1: different commitment and deck",
            "shoe-1",
            "h1",
            bytes(45),
        ),
        search(
            "standard/rejected-twice",
            "attempts 0 and 1 are rejected (section 4)",
            "standard",
            "reject-2",
            lambda attempts: attempts == 3,
            ["alice"],
        ),
        search(
            "jokers/rejected-three-times",
            "attempts 0, 1 and 2 are rejected; attempt 2 straddles blocks 0 and 1",
            "jokers",
            "reject-3",
            lambda attempts: attempts == 4,
        ),
        search(
            "short/rejected-four-or-more-times",
            "four or more attempts rejected; attempts read past the first 64-byte block",
            "short",
            "reject-4",
            lambda attempts: attempts >= 5,
        ),
        search(
            "shoe-8/rejected-twice",
            "the largest deck, attempts 0 and 1 rejected: each attempt spans 6 or 7 blocks",
            "shoe-8",
            "reject-shoe-8",
            lambda attempts: attempts == 3,
            ["alice", "bob"],
        ),
        valid(
            "shoe-8/several-client-seeds",
            "the largest deck with several client seeds",
            "shoe-8",
            "big-shoe",
            seed_for("shoe-8/several-client-seeds", "shoe-8"),
            several,
        ),
        valid(
            "short/worked-example",
            "the worked example of spec section 10",
            "short",
            "example-1",
            bytes(range(34)),
            ["alice"],
        ),
    ]
    return out


def _transcript(vector: Vector) -> Vector:
    keys = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")
    return {key: vector[key] for key in keys}


def invalid_vectors(valid_list: list[Vector]) -> list[Vector]:
    by_name = {v["name"]: v for v in valid_list}
    base = _transcript(by_name["standard/one-client-seed"])
    shoe = _transcript(by_name["shoe-2/one-client-seed"])
    out: list[Vector] = []

    def bad(name: str, step: str, description: str, transcript: Any) -> None:
        out.append(
            {"name": name, "description": description, "expected_step": step, "transcript": transcript}
        )

    def edit(source: Vector, **changes: Any) -> Vector:
        result = dict(source)
        result.update(changes)
        return result

    seed = bytes.fromhex(base["server_seed"])
    commitment = bytes.fromhex(base["commitment"])
    cards = base["cards"]

    # 6.1 version
    for name, version in [("fairdeck-v2", "fairdeck-v2"), ("upper-case", "FAIRDECK-V1"), ("empty", "")]:
        bad(
            f"version/{name}",
            "version",
            f"unknown algorithm version {version!r}",
            edit(base, version=version),
        )

    # 6.2 malformed: server seed, client seeds, hand id, commitment, cards
    for name, length in [("too-short", len(seed) - 1), ("too-long", len(seed) + 1)]:
        wrong = label_bytes(f"wrong-length/{name}", length)
        bad(
            f"server-seed/{name}",
            "malformed",
            f"server seed of {length} bytes for standard (45 wanted); the commitment does open it",
            edit(base, server_seed=wrong.hex(), commitment=commit("standard", base["hand_id"], wrong).hex()),
        )
    bad(
        "client-seeds/too-long",
        "malformed",
        "a client seed of 257 bytes",
        edit(base, client_seeds=[label_bytes("client/too-long", 257).hex()]),
    )
    bad("client-seeds/empty-seed", "malformed", "a client seed of 0 bytes", edit(base, client_seeds=[""]))
    bad(
        "client-seeds/too-many",
        "malformed",
        "65 client seeds",
        edit(base, client_seeds=[bytes([i]).hex() for i in range(65)]),
    )
    for name, hand_id in [
        ("space", "hand 1"),
        ("too-long", "h" * 65),
        ("empty", ""),
        ("non-ascii", "h\u00e4nd"),
        ("slash", "hand/1"),
    ]:
        bad(f"hand-id/{name}", "malformed", f"hand id {hand_id!r}", edit(base, hand_id=hand_id))
    bad(
        "commitment/too-short",
        "malformed",
        "a commitment of 31 bytes",
        edit(base, commitment=commitment[:31].hex()),
    )
    bad("cards/one-missing", "malformed", "51 cards for a 52-card deck", edit(base, cards=cards[:-1]))
    bad("cards/one-extra", "malformed", "53 cards for a 52-card deck", edit(base, cards=[*cards, cards[0]]))
    bad("cards/none", "malformed", "no cards", edit(base, cards=[]))

    # Parsing (section 7), reported as malformed
    for name, deck in [("shoe-9", "shoe-9"), ("capitalised", "Standard"), ("empty", "")]:
        bad(f"deck/{name}", "malformed", f"unknown deck spec {deck!r}", edit(base, deck=deck))
    shoe_cards = shoe["cards"]
    form_cases = [
        ("shoe-code-without-deck-number", shoe, 0, shoe_cards[0].split(".")[0], "'RS' form in a shoe"),
        ("shoe-deck-number-too-high", shoe, 0, shoe_cards[0].split(".")[0] + ".3", "deck 3 in shoe-2"),
        ("shoe-deck-number-leading-zero", shoe, 0, shoe_cards[0].split(".")[0] + ".01", "'.01'"),
        ("shoe-code-in-standard", base, 0, cards[0] + ".1", "'RS.D' form in standard"),
        ("joker-in-standard", base, 0, "X1", "a joker in standard"),
        ("lower-case", base, 0, "as", "codes are case-sensitive"),
        ("not-a-card", base, 0, "1s", "no such rank"),
    ]
    for name, source, position, code, why in form_cases:
        changed = list(source["cards"])
        changed[position] = code
        bad(f"cards/{name}", "malformed", f"card code {code!r}: {why}", edit(source, cards=changed))
    short = _transcript(by_name["short/one-client-seed"])
    short_cards = list(short["cards"])
    short_cards[0] = "2c"
    bad(
        "cards/two-in-short",
        "malformed",
        "'2c' is not a card of the short deck",
        edit(short, cards=short_cards),
    )

    bad("hex/upper-case", "malformed", "upper-case hex", edit(base, commitment=base["commitment"].upper()))
    bad(
        "hex/odd-length",
        "malformed",
        "odd number of hex digits",
        edit(base, server_seed=base["server_seed"][:-1]),
    )
    bad(
        "hex/0x-prefix", "malformed", "'0x' prefix", edit(base, client_seeds=["0x" + base["client_seeds"][0]])
    )
    bad("hex/not-hex", "malformed", "a non-hex digit", edit(base, server_seed="g" + base["server_seed"][1:]))
    bad("hex/space", "malformed", "a space inside hex", edit(base, commitment=base["commitment"][:62] + " 0"))

    bad("json/unknown-key", "malformed", "an extra key", edit(base, comment="hello"))
    missing = dict(base)
    del missing["cards"]
    bad("json/missing-key", "malformed", "no 'cards' key", missing)
    bad(
        "json/card-ids",
        "malformed",
        "cards as integer ids",
        edit(base, cards=list(range(52))),
    )
    bad("json/client-seeds-string", "malformed", "client_seeds not a list", edit(base, client_seeds="00"))
    bad("json/version-number", "malformed", "version is a number", edit(base, version=1))
    bad("json/hand-id-null", "malformed", "hand_id is null", edit(base, hand_id=None))
    bad("json/not-an-object", "malformed", "the transcript is a list", [base])

    # 6.3 commitment
    flipped = bytearray(commitment)
    flipped[-1] ^= 1
    bad(
        "commitment/bit-flipped",
        "commitment",
        "last bit of the commitment flipped",
        edit(base, commitment=flipped.hex()),
    )
    other = bytearray(seed)
    other[0] ^= 1
    bad(
        "commitment/other-server-seed",
        "commitment",
        "a server seed of the right length that does not open the commitment",
        edit(base, server_seed=other.hex()),
    )
    bad(
        "commitment/other-hand-id",
        "commitment",
        "the commitment was made for another hand id",
        edit(base, hand_id="standard-hand-9"),
    )
    bad(
        "commitment/other-deck",
        "commitment",
        "shoe-1 transcript presented with the standard hand's commitment",
        edit(
            _transcript(by_name["shoe-1/same-inputs-as-standard"]),
            commitment=by_name["standard/zero-server-seed"]["commitment"],
        ),
    )

    # 6.4 deck
    swapped = list(cards)
    swapped[0], swapped[1] = swapped[1], swapped[0]
    bad("deck/swapped-two-cards", "deck", "the top two cards swapped", edit(base, cards=swapped))
    last_swapped = list(shoe_cards)
    last_swapped[-1], last_swapped[-2] = last_swapped[-2], last_swapped[-1]
    bad(
        "deck/shoe-swapped-last-two",
        "deck",
        "the bottom two cards of a shoe swapped",
        edit(shoe, cards=last_swapped),
    )
    duplicated = list(cards)
    duplicated[1] = duplicated[0]
    bad(
        "deck/duplicated-card",
        "deck",
        "the second card replaced by a copy of the first",
        edit(base, cards=duplicated),
    )
    bad(
        "deck/canonical-order",
        "deck",
        "the unshuffled canonical order",
        edit(base, cards=[card.code for card in DeckSpec.parse("standard").cards]),
    )
    bad("deck/client-seed-dropped", "deck", "the client seed left out", edit(base, client_seeds=[]))
    several = _transcript(by_name["standard/several-client-seeds"])
    bad(
        "deck/client-seeds-reordered",
        "deck",
        "the client seeds of standard/several-client-seeds in another order",
        edit(several, client_seeds=list(reversed(several["client_seeds"]))),
    )
    bad(
        "deck/client-seed-not-normalized",
        "deck",
        "the client seed of standard/nfc-decomposed recorded before NFC (65cc81, not c3a9)",
        edit(_transcript(by_name["standard/nfc-decomposed"]), client_seeds=["65cc81"]),
    )
    bad(
        "deck/cards-of-other-deck-spec",
        "deck",
        "standard/zero-server-seed's cards under shoe-1's inputs, rewritten in shoe form",
        edit(
            _transcript(by_name["shoe-1/same-inputs-as-standard"]),
            cards=[f"{code}.1" for code in by_name["standard/zero-server-seed"]["cards"]],
        ),
    )
    return out


def build() -> dict[str, Any]:
    """The whole vectors document."""
    valid_list = valid_vectors()
    return {
        "version": VERSION,
        "description": (
            "Known-answer vectors of docs/fairness-spec.md (section 11), generated by "
            "docs/vectors/generate.py. 'valid' hands must verify and re-derive to 'cards'; "
            "'invalid' transcripts must be rejected at 'expected_step'. Never edit by hand."
        ),
        "valid": valid_list,
        "invalid": invalid_vectors(valid_list),
    }


def render(value: Any, indent: int = 0) -> str:
    """JSON, indented like json.dumps(indent=2) but with lists of scalars wrapped at ~100 columns.

    ASCII only (``ensure_ascii``), so no editor or tool can re-normalize the text seeds.
    """
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}  {json.dumps(k)}: {render(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if any(isinstance(v, dict | list) for v in value):
            return "[\n" + ",\n".join(pad + "  " + render(v, indent + 1) for v in value) + "\n" + pad + "]"
        lines, line = [], ""
        for text in (json.dumps(v) for v in value):
            if line and len(pad) + len(line) + len(text) > 96:
                lines.append(line)
                line = ""
            line += ("" if not line else " ") + text + ","
        lines.append(line)
        body = ("\n" + pad + "  ").join(lines)
        return "[\n" + pad + "  " + body[:-1] + "\n" + pad + "]"
    return json.dumps(value)


def document() -> str:
    """The exact text of fairdeck-v1.json."""
    return render(build()) + "\n"


def main(argv: Sequence[str]) -> int:
    text = document()
    if "--check" in argv:
        if OUTPUT.read_text(encoding="ascii") != text:
            print(f"{OUTPUT} differs from what {Path(__file__).name} generates", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="ascii")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
