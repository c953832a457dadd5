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

import base64
import hashlib
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fairdeck.core.commitment import commit
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.derivation import Stream, derive_deck
from fairdeck.core.encoding import lp, u32, u64
from fairdeck.core.seeds import normalize_client_seeds, server_seed_length
from fairdeck.core.shuffle import shuffler
from fairdeck.core.transcript import Transcript
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.cosignature import Cosigner, WitnessPolicy, add_cosignatures, signed_message
from fairdeck.log.handproof import HandProof
from fairdeck.log.logentry import CLOSED, MAGIC, VOIDED, CommitEntry, Entry, RevealEntry, deck_digest
from fairdeck.log.note import Signer, sign_note
from fairdeck.log.receipts import InclusionProof
from fairdeck.log.tiles import encode_bundle, tile_path, tiles_for

VERSION = "fairdeck-v1"
OUTPUT = Path(__file__).with_name("fairdeck-v1.json")
TEXTS_OUTPUT = Path(__file__).with_name("fairdeck-v1-texts.json")
LOG_OUTPUT = Path(__file__).with_name("fairdeck-log-v1.json")
WITNESS_OUTPUT = Path(__file__).with_name("fairdeck-witness-v1.json")
TILES_OUTPUT = Path(__file__).with_name("fairdeck-tiles-v1.json")
HAND_PROOFS_OUTPUT = Path(__file__).with_name("fairdeck-hand-proofs-v1.json")
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
        index=index.to_bytes(shuffler(spec.size).width, "big").hex(),
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
    # Added after publication (section 9 allows new invalid cases), appended so none moves.
    # Section 7.2: the version is read first. An unknown version is step "version"
    # whatever the rest holds; no readable version (missing, not a string) is "malformed".
    v2 = "fairdeck-v2"
    for name, description, transcript in [
        ("cards-not-strings", "cards [1]", edit(base, version=v2, cards=[1])),
        ("client-seeds-not-strings", "client_seeds [1]", edit(base, version=v2, client_seeds=[1])),
        ("deck-null", "deck null", edit(base, version=v2, deck=None)),
        ("bad-hex", "server_seed not hex", edit(base, version=v2, server_seed="XYZ")),
        (
            "unknown-deck-and-codes",
            "deck 'tarot', cards ['Zz']",
            edit(base, version=v2, deck="tarot", cards=["Zz"]),
        ),
        ("unknown-name", "an extra name 'salt'", edit(base, version=v2, salt="00")),
        ("no-other-names", "only the name 'version'", {"version": v2}),
    ]:
        bad(
            f"version/{v2}-{name}",
            "version",
            f"version {v2!r} with {description}: the version is read first (section 7.2)",
            transcript,
        )
    without_version = dict(base)
    del without_version["version"]
    bad("json/version-missing", "malformed", "no 'version' name", without_version)
    bad("json/version-null", "malformed", "version is null", edit(base, version=None))
    bad("json/version-list", "malformed", "version is a list", edit(base, version=[VERSION]))
    return out


def text_vectors(valid_list: list[Vector]) -> dict[str, Any]:
    """Raw texts (section 7.1): what the vectors file cannot hold because it holds parsed values."""
    example = _transcript({v["name"]: v for v in valid_list}["short/worked-example"])
    pretty = json.dumps(example, indent=2) + "\n"  # the reference layout (section 7)
    compact = json.dumps(example, separators=(",", ":"))
    reordered = json.dumps(dict(reversed(list(example.items()))), separators=(", ", ": "))
    v2 = dict(example, version="fairdeck-v2")
    out: list[Vector] = []

    def case(name: str, step: str | None, description: str, raw: bytes) -> None:
        out.append({"name": name, "description": description, "expected_step": step, "text": raw.hex()})

    body = compact[1:-1]
    case(
        "valid/reference-layout",
        None,
        "the layout fairdeck writes: two-space indent, newline",
        pretty.encode(),
    )
    case("valid/compact", None, "no whitespace at all", compact.encode())
    case("valid/reordered", None, "names in reverse order", reordered.encode())
    case(
        "valid/json-whitespace",
        None,
        "all four JSON whitespace characters (space, tab, CR, LF) around every token",
        ("\t\r\n " + compact.replace(",", " ,\r\n\t").replace(":", "\t:\n ") + "\r\n").encode(),
    )
    case(
        "valid/escapes",
        None,
        "escapes are decoded before any rule applies: \\u0066 is 'f', \\u005f is '_', \\u0030 is '0'",
        compact.replace('"fairdeck-v1"', '"\\u0066airdeck-v1"')
        .replace('"hand_id"', '"hand\\u005fid"')
        .replace('"server_seed":"00', '"server_seed":"\\u00300')
        .encode(),
    )
    # duplicate names (section 7.1: MUST be rejected, wherever they are)
    case(
        "duplicate/same-value",
        "malformed",
        "the name 'deck' twice, with the same value",
        ("{" + body + ',"deck":"short"}').encode(),
    )
    case(
        "duplicate/version-first-unknown",
        "malformed",
        "'version' twice, first 'fairdeck-v2' then 'fairdeck-v1': no parser may pick one",
        ('{"version":"fairdeck-v2",' + body + "}").encode(),
    )
    case(
        "duplicate/by-escape",
        "malformed",
        "'cards' and '\\u0063ards' are the same name once unescaped",
        ("{" + body + ',"\\u0063ards":[]}').encode(),
    )
    case(
        "duplicate/nested-in-unknown-version",
        "malformed",
        "a duplicate name inside an object of a fairdeck-v2 transcript: the text fails before the version",
        (b'{"version":"fairdeck-v2","extra":{"a":1,"a":2}}'),
    )
    # encodings
    case(
        "encoding/bom",
        "malformed",
        "a UTF-8 byte order mark before the text",
        b"\xef\xbb\xbf" + pretty.encode(),
    )
    case("encoding/utf-16le", "malformed", "the text in UTF-16LE with its BOM", pretty.encode("utf-16"))
    case("encoding/utf-16be-no-bom", "malformed", "the text in UTF-16BE", pretty.encode("utf-16-be"))
    case(
        "encoding/invalid-utf8-in-string",
        "malformed",
        "a byte 0xff inside the hand id string",
        compact.encode().replace(b"example-1", b"example-\xff"),
    )
    case(
        "encoding/invalid-utf8-in-unknown-version",
        "malformed",
        "a byte 0xff in a fairdeck-v2 transcript: the text is rejected before the version",
        json.dumps(v2, separators=(",", ":")).encode().replace(b"example-1", b"example-\xff"),
    )
    case(
        "encoding/overlong-utf8",
        "malformed",
        "'/' as the overlong two-byte sequence c0 af",
        compact.encode().replace(b"example-1", b"example\xc0\xaf1"),
    )
    case(
        "encoding/utf8-surrogate",
        "malformed",
        "U+D800 encoded in UTF-8 (ed a0 80), which UTF-8 forbids",
        compact.encode().replace(b"example-1", b"example\xed\xa0\x801"),
    )
    case(
        "encoding/lone-surrogate-escape",
        "malformed",
        "the escape \\ud800 without a low surrogate, in a fairdeck-v2 transcript",
        json.dumps(dict(v2, hand_id="x")).replace('"x"', '"\\ud800"').encode(),
    )
    case(
        "encoding/non-ascii-utf8",
        "malformed",
        "valid UTF-8 text, but a hand id with U+00E4 breaks the hand-id rule (6.2)",
        json.dumps(dict(example, hand_id="h\u00e4nd"), ensure_ascii=False).encode(),
    )
    # not JSON
    for name, description, raw in [
        ("empty", "zero bytes", b""),
        ("whitespace-only", "only whitespace", b" \n"),
        ("truncated", "the text cut before its last brace", pretty.encode()[:-2]),
        ("trailing-data", "a second value after the object", pretty.encode() + b"{}"),
        ("trailing-comma", "a comma after the last member", ("{" + body + ",}").encode()),
        ("single-quotes", "names in single quotes", ("{" + body.replace('"', "'") + "}").encode()),
        ("comment", "a // comment", ("{// note\n" + body + "}").encode()),
        ("nan", "NaN as a value in a fairdeck-v2 transcript", b'{"version":"fairdeck-v2","x":NaN}'),
        ("infinity", "Infinity in a fairdeck-v2 transcript", b'{"version":"fairdeck-v2","x":-Infinity}'),
        (
            "control-character",
            "a raw tab inside a string",
            compact.encode().replace(b"example-1", b"example\t1"),
        ),
        ("bad-escape", "the escape \\x41", compact.encode().replace(b"example-1", b"example\\x41")),
        ("leading-zero", "the number 01 in a fairdeck-v2 transcript", b'{"version":"fairdeck-v2","x":01}'),
        (
            "too-deep",
            "an object holding arrays nested 32 deep, 33 levels, in a fairdeck-v2 transcript (at most 32)",
            b'{"version":"fairdeck-v2","x":' + b"[" * 32 + b"]" * 32 + b"}",
        ),
    ]:
        case(f"not-json/{name}", "malformed", description, raw)
    case(
        "limits/deep-enough",
        "version",
        "an object holding arrays nested 31 deep, 32 levels, in a fairdeck-v2 transcript: the limit is met",
        b'{"version":"fairdeck-v2","x":' + b"[" * 31 + b"]" * 31 + b"}",
    )
    case(
        "limits/long-number",
        "version",
        "a 5000-digit integer in a fairdeck-v2 transcript is JSON; numbers are never converted",
        b'{"version":"fairdeck-v2","x":' + b"7" * 5000 + b"}",
    )
    case("top-level/array", "malformed", "a JSON array", b"[]")
    case("top-level/string", "malformed", "a JSON string", b'"fairdeck-v1"')
    return {
        "version": VERSION,
        "description": (
            "Raw transcript texts of docs/fairness-spec.md section 7.1, made by docs/vectors/generate.py. "
            "'text' is the hex of the exact bytes; 'expected_step' is null when the text verifies, "
            "else the step that must fail first. Never edit by hand."
        ),
        "texts": out,
    }


LOG_ORIGIN = "log.example/fairdeck-vectors"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def log_vectors(valid_list: list[Vector]) -> dict[str, Any]:
    """Known-answer vectors of docs/log-format.md: entries, leaves, roots, proofs, checkpoints, receipts."""
    by_name = {v["name"]: v for v in valid_list}
    signer = Signer.from_seed(LOG_ORIGIN, label_bytes("log/key", 32))
    other = Signer.from_seed(LOG_ORIGIN, label_bytes("log/other-key", 32))

    def hand(name: str) -> tuple[Vector, tuple[bytes, ...], tuple[int, ...]]:
        v = by_name[name]
        spec = DeckSpec.parse(v["deck"])
        ids = {spec.card_for_id(i).code: i for i in spec.card_ids}
        return v, tuple(bytes.fromhex(c) for c in v["client_seeds"]), tuple(ids[c] for c in v["cards"])

    def commit_entry(name: str, time_ms: int) -> CommitEntry:
        v, _, _ = hand(name)
        return CommitEntry(time_ms, v["hand_id"], v["version"], v["deck"], bytes.fromhex(v["commitment"]))

    def reveal_entry(name: str, time_ms: int, outcome: int) -> RevealEntry:
        v, seeds, cards = hand(name)
        server_seed = bytes.fromhex(v["server_seed"])
        return RevealEntry(time_ms, v["hand_id"], outcome, server_seed, seeds, deck_digest(cards))

    t = 1_700_000_000_000
    plan: list[tuple[str, str, Entry]] = [
        (
            "commit/worked-example",
            "the commitment of spec section 10's hand",
            commit_entry("short/worked-example", t),
        ),
        ("commit/standard", "a standard hand", commit_entry("standard/no-client-seeds", t + 1)),
        (
            "reveal/worked-example",
            "the reveal of spec section 10's hand: one client seed, its 36-card deck digested",
            reveal_entry("short/worked-example", t + 2, CLOSED),
        ),
        (
            "commit/shoe-8",
            "the largest deck, time_ms at its maximum 2**64-1",
            commit_entry("shoe-8/several-client-seeds", 2**64 - 1),
        ),
        (
            "reveal/standard-voided",
            "the standard hand voided by the dealer (outcome 2) with no client seeds",
            reveal_entry("standard/no-client-seeds", t + 4, VOIDED),
        ),
        (
            "reveal/shoe-8",
            "four client seeds, one binary; the 416-card deck digested",
            reveal_entry("shoe-8/several-client-seeds", 0, CLOSED),
        ),
        (
            "commit/jokers",
            "a hand still open: a commitment with no reveal yet",
            commit_entry("jokers/no-client-seeds", t + 6),
        ),
    ]
    entries = [e.encode() for _, _, e in plan]
    leaves = [merkle.leaf_hash(e) for e in entries]
    store: list[bytes] = []
    read = lambda indexes: [store[i] for i in indexes]  # noqa: E731
    for n, h in enumerate(leaves):
        store += merkle.stored_hashes_for_append(n, h, read)

    entry_vectors: list[Vector] = []
    for (name, description, e), raw, leaf in zip(plan, entries, leaves, strict=True):
        fields: Vector = {"type": "commit" if isinstance(e, CommitEntry) else "reveal", "time_ms": e.time_ms}
        if isinstance(e, CommitEntry):
            fields.update(hand_id=e.hand_id, version=e.version, deck=e.deck, commitment=e.commitment.hex())
        else:
            source = next(v for v in valid_list if v["hand_id"] == e.hand_id)
            fields.update(
                hand_id=e.hand_id,
                outcome=e.outcome,
                server_seed=e.server_seed.hex(),
                client_seeds=[c.hex() for c in e.client_seeds],
                deck_digest=e.deck_digest.hex(),
                cards_from=source["name"],
            )
        entry_vectors.append(
            {"name": name, "description": description, **fields, "entry": raw.hex(), "leaf_hash": leaf.hex()}
        )

    # Entries that MUST be rejected (log-format.md, "Parsing"), each one change from a valid one.
    good_commit, good_reveal = entries[0], entries[2]
    c, r = plan[0][2], plan[2][2]
    assert isinstance(c, CommitEntry) and isinstance(r, RevealEntry)

    def raw_commit(hand_id: bytes, version: bytes, deck: bytes, commitment: bytes) -> bytes:
        return MAGIC + b"\x01" + u64(c.time_ms) + lp(hand_id) + lp(version) + lp(deck) + lp(commitment)

    def raw_reveal(outcome: int, seeds: Sequence[bytes], digest: bytes, count: int | None = None) -> bytes:
        k = len(seeds) if count is None else count
        head = (
            MAGIC + b"\x02" + u64(r.time_ms) + lp(r.hand_id.encode()) + bytes([outcome]) + lp(r.server_seed)
        )
        return head + u32(k) + b"".join(lp(x) for x in seeds) + lp(digest)

    hid, ver, deck, com = c.hand_id.encode(), c.version.encode(), c.deck.encode(), c.commitment
    invalid_entries = [
        ("magic", "magic 'FDL2'", b"FDL2" + good_commit[4:]),
        ("type-0", "entry type 0", good_commit[:4] + b"\x00" + good_commit[5:]),
        ("type-3", "entry type 3", good_commit[:4] + b"\x03" + good_commit[5:]),
        ("empty", "zero bytes", b""),
        ("truncated", "the last byte missing", good_commit[:-1]),
        ("trailing-byte", "one byte after the last field", good_reveal + b"\x00"),
        ("length-past-end", "a length prefix of 2**32-1", good_commit[:13] + b"\xff\xff\xff\xff"),
        ("hand-id-non-ascii", "hand id with byte 0xe4", raw_commit(b"h\xe4nd", ver, deck, com)),
        ("hand-id-space", "hand id 'hand 1'", raw_commit(b"hand 1", ver, deck, com)),
        ("hand-id-empty", "hand id of 0 bytes", raw_commit(b"", ver, deck, com)),
        ("hand-id-too-long", "hand id of 65 characters", raw_commit(b"h" * 65, ver, deck, com)),
        ("version-unknown", "version 'fairdeck-v2'", raw_commit(hid, b"fairdeck-v2", deck, com)),
        ("version-empty", "version of 0 bytes", raw_commit(hid, b"", deck, com)),
        ("deck-unknown", "deck 'shoe-9'", raw_commit(hid, ver, b"shoe-9", com)),
        ("deck-non-ascii", "deck with byte 0xe9", raw_commit(hid, ver, b"short\xe9", com)),
        ("commitment-31-bytes", "a commitment of 31 bytes", raw_commit(hid, ver, deck, com[:31])),
        ("commitment-33-bytes", "a commitment of 33 bytes", raw_commit(hid, ver, deck, com + b"\x00")),
        ("outcome-0", "reveal outcome 0", raw_reveal(0, r.client_seeds, r.deck_digest)),
        ("outcome-3", "reveal outcome 3", raw_reveal(3, r.client_seeds, r.deck_digest)),
        ("client-seeds-65", "65 client seeds (at most 64)", raw_reveal(1, [b"x"] * 65, r.deck_digest)),
        ("client-seed-empty", "a client seed of 0 bytes", raw_reveal(1, [b""], r.deck_digest)),
        ("client-seed-257-bytes", "a client seed of 257 bytes", raw_reveal(1, [b"x" * 257], r.deck_digest)),
        ("client-seed-count-huge", "k = 2**32-1 and no seeds", raw_reveal(1, [], r.deck_digest, 2**32 - 1)),
        (
            "deck-digest-31-bytes",
            "a deck digest of 31 bytes",
            raw_reveal(1, r.client_seeds, r.deck_digest[:31]),
        ),
        ("deck-digest-empty", "a deck digest of 0 bytes", raw_reveal(1, r.client_seeds, b"")),
    ]

    # Roots, proofs and signed checkpoints of the log of these entries.
    size = len(entries)
    roots = [{"size": n, "root": merkle.tree_hash(n, read).hex()} for n in range(size + 1)]
    notes = {
        n: sign_checkpoint(Checkpoint(LOG_ORIGIN, n, merkle.tree_hash(n, read)), signer).decode("utf-8")
        for n in (0, 1, 4, size)
    }
    inclusion = [
        {"index": i, "tree_size": n, "proof": [h.hex() for h in merkle.prove_inclusion(i, n, read)]}
        for n in (1, 4, size)
        for i in range(n)
    ]
    consistency = [
        {"size1": m, "size2": n, "proof": [h.hex() for h in merkle.prove_consistency(m, n, read)]}
        for m, n in [(1, size), (3, size), (4, size), (6, size), (size, size), (1, 4), (4, 4)]
    ]

    root = merkle.tree_hash(size, read)
    extended = Checkpoint(LOG_ORIGIN, size, root, ("fairdeck never writes extension lines",))
    checkpoints = [
        {"name": "size-0", "description": "the empty log: root SHA-256 of the empty string", "valid": True},
        {"name": "size-7", "description": "the log of the seven entries", "valid": True},
    ]
    checkpoints[0]["note"], checkpoints[1]["note"] = notes[0], notes[size]
    text = Checkpoint(LOG_ORIGIN, size, root).to_text()
    root64 = _b64(root)

    def signed(body: str, by: Signer = signer) -> str:
        return sign_note(body, by).decode("utf-8")

    for name, description, note, ok in [
        (
            "extension-line",
            "one extension line after the root: accepted, and ignored",
            signed(extended.to_text()),
            True,
        ),
        ("other-key", "the same text signed by another key of the same name", signed(text, other), False),
        (
            "text-changed",
            "the size changed after signing",
            notes[size].replace(f"\n{size}\n", "\n6\n", 1),
            False,
        ),
        ("size-leading-zero", "tree size '07'", signed(text.replace(f"\n{size}\n", f"\n0{size}\n")), False),
        ("size-sign", "tree size '+7'", signed(text.replace(f"\n{size}\n", f"\n+{size}\n")), False),
        ("root-not-base64", "root hash in hex", signed(text.replace(root64, root.hex())), False),
        (
            "root-no-padding",
            "root hash base64 without its '='",
            signed(text.replace(root64, root64.rstrip("="))),
            False,
        ),
        ("root-31-bytes", "a root of 31 bytes", signed(text.replace(root64, _b64(root[:31]))), False),
        ("empty-extension-line", "an empty line after the root", signed(text + "\n"), False),
        (
            "origin-other",
            "origin differs from the key name",
            signed(text.replace(LOG_ORIGIN, "log.example/other", 1)),
            False,
        ),
        ("two-lines", "no root hash line", signed(f"{LOG_ORIGIN}\n{size}\n"), False),
    ]:
        checkpoints.append({"name": name, "description": description, "valid": ok, "note": note})

    def receipt(index: int, tree_size: int) -> InclusionProof:
        proof = tuple(merkle.prove_inclusion(index, tree_size, read))
        return InclusionProof(index, tree_size, proof, entries[index], notes[tree_size].encode("utf-8"))

    good = receipt(2, size)
    good_json = json.loads(good.to_json())

    def changed(**changes: Any) -> str:
        return json.dumps(dict(good_json, **changes), indent=2)

    flipped = bytearray(good.hashes[0])
    flipped[0] ^= 1
    altered = bytearray(good.entry)
    altered[-1] ^= 1
    receipts_list: list[Vector] = [
        {
            "name": "valid/reveal-of-worked-example",
            "description": "entry 2 in the tree of 7",
            "valid": True,
            "text": good.to_json(),
        },
        {
            "name": "valid/last-entry",
            "description": "entry 6, the last, of 7",
            "valid": True,
            "text": receipt(6, size).to_json(),
        },
        {
            "name": "valid/single-leaf",
            "description": "entry 0 of a tree of 1: no hashes",
            "valid": True,
            "text": receipt(0, 1).to_json(),
        },
    ]
    other_note = sign_checkpoint(Checkpoint(LOG_ORIGIN, size, root), other).decode("utf-8")
    for name, description, text_ in [
        (
            "hash-flipped",
            "one bit of hashes[0] flipped",
            changed(hashes=[_b64(bytes(flipped)), *good_json["hashes"][1:]]),
        ),
        ("hash-missing", "the last hash left out", changed(hashes=good_json["hashes"][:-1])),
        ("hash-extra", "one hash too many", changed(hashes=[*good_json["hashes"], good_json["hashes"][0]])),
        ("entry-altered", "the last byte of the entry changed", changed(entry=_b64(bytes(altered)))),
        ("other-index", "index 3 with entry 2's proof", changed(index=3)),
        ("index-past-size", "index 7 in a tree of 7", changed(index=7)),
        ("tree-size-mismatch", "tree_size 6 with the checkpoint of size 7", changed(tree_size=6)),
        (
            "checkpoint-other-key",
            "the checkpoint signed by another key",
            changed(signed_checkpoint=other_note),
        ),
        (
            "checkpoint-of-size-4",
            "the proof for 7 with the checkpoint of size 4",
            changed(signed_checkpoint=notes[4]),
        ),
        ("index-as-string", 'index "2"', changed(index="2")),
        (
            "hash-31-bytes",
            "hashes[0] of 31 bytes",
            changed(hashes=[_b64(good.hashes[0][:31]), *good_json["hashes"][1:]]),
        ),
        ("hash-hex", "hashes[0] in hex", changed(hashes=[good.hashes[0].hex(), *good_json["hashes"][1:]])),
        (
            "entry-urlsafe-base64",
            "entry in the URL-safe alphabet",
            changed(entry=base64.urlsafe_b64encode(good.entry).decode() + "_-"),
        ),
        ("extra-name", "an extra name 'comment'", changed(comment="x")),
        ("missing-name", "no 'entry'", json.dumps({k: v for k, v in good_json.items() if k != "entry"})),
    ]:
        receipts_list.append({"name": name, "description": description, "valid": False, "text": text_})
    for name, number in [
        ("index-float", "2.0"),
        ("index-exponent", "2e0"),
        ("index-negative-zero", "-0"),
        ("tree-size-2-64", str(2**64)),
    ]:
        field = "tree_size" if name.startswith("tree-size") else "index"
        body = changed(**{field: 0}).replace(f'"{field}": 0', f'"{field}": {number}')
        receipts_list.append(
            {"name": name, "description": f"{field} written {number}", "valid": False, "text": body}
        )

    # A signed tree whose one entry does not parse: the path and signature hold, step 5 does not.
    garbage = b"FDL1\x01 not an entry"
    garbage_note = sign_checkpoint(Checkpoint(LOG_ORIGIN, 1, merkle.leaf_hash(garbage)), signer)
    receipts_list.append(
        {
            "name": "entry-does-not-parse",
            "description": "a one-entry tree, signed, whose entry does not parse",
            "valid": False,
            "text": InclusionProof(0, 1, (), garbage, garbage_note).to_json(),
        }
    )

    return {
        "version": "fairdeck-log-v1",
        "description": (
            "Known-answer vectors of docs/log-format.md, generated by docs/vectors/generate.py. "
            "Hex is lower case, two digits per byte. Never edit by hand."
        ),
        "key": {
            "origin": LOG_ORIGIN,
            "verifier_key": signer.verifier.to_string(),
            "signer_seed": label_bytes("log/key", 32).hex(),
            "note": "a test key derived from a fixed label; never use it for a real log",
        },
        "entries": entry_vectors,
        "invalid_entries": [{"name": n, "description": d, "entry": e.hex()} for n, d, e in invalid_entries],
        "roots": roots,
        "inclusion_proofs": inclusion,
        "consistency_proofs": consistency,
        "checkpoints": checkpoints,
        "receipts": receipts_list,
    }


class _Tree:
    """A log of entries b"witness vector entry N", its stored hashes as merkle lays them out."""

    def __init__(self, size: int, tag: bytes = b"witness vector entry") -> None:
        self.hashes: list[bytes] = []
        for n in range(size):
            leaf = merkle.leaf_hash(tag + b" %d" % n)
            self.hashes += merkle.stored_hashes_for_append(n, leaf, self.read)

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        return [self.hashes[i] for i in indexes]

    def root(self, size: int) -> bytes:
        return merkle.tree_hash(size, self.read)

    def body(self, old: int, size: int, signer: Signer, proof: Sequence[bytes] | None = None) -> bytes:
        """An add-checkpoint request body (tlog-witness, "add-checkpoint")."""
        if proof is None:
            proof = [] if old in (0, size) else merkle.prove_consistency(old, size, self.read)
        head = f"old {old}\n" + "".join(_b64(h) + "\n" for h in proof) + "\n"
        return head.encode() + sign_checkpoint(Checkpoint(signer.name, size, self.root(size)), signer)


def witness_vectors() -> dict[str, Any]:
    """Known answers of docs/witness.md: cosignature/v1 lines, policies, and add-checkpoint answers."""
    log_signer = Signer.from_seed("example.com/fairdeck-witnessed", label_bytes("witness/log key", 32))
    w1 = Cosigner.from_seed("witness.example/w1", label_bytes("witness/w1", 32))
    w2 = Cosigner.from_seed("witness.example/w2", label_bytes("witness/w2", 32))
    stranger = Cosigner.from_seed("witness.example/w1", label_bytes("witness/another w1 key", 32))
    tree, fork = _Tree(12), _Tree(12, b"a forked entry")
    time = 1_700_000_000
    text = Checkpoint(log_signer.name, 7, tree.root(7)).to_text()

    def key(c: Cosigner) -> dict[str, Any]:
        return {
            "name": c.name,
            "seed": c.seed.hex(),
            "vkey": c.verifier.to_string(),
            "key_id": f"{c.verifier.key_id:08x}",
        }

    cosignatures = [
        {
            "name": f"{c.name} at {t}",
            "vkey": c.verifier.to_string(),
            "checkpoint": text,
            "timestamp": t,
            "signed_message": _b64(signed_message(text, t)),
            "line": c.cosign(text, t),
        }
        for c, t in [(w1, time), (w2, time), (w1, 1)]
    ]
    good = w1.cosign(text, time)
    raw = base64.b64decode(good.split()[-1])

    def relined(data: bytes) -> str:
        return f"\u2014 {w1.name} {_b64(data)}\n"

    broken = [
        ("another timestamp", relined(raw[:4] + (time + 1).to_bytes(8, "big") + raw[12:]), "invalid"),
        ("a flipped signature bit", relined(raw[:12] + bytes([raw[12] ^ 1]) + raw[13:]), "invalid"),
        ("another checkpoint's signature", w1.cosign(text.replace("\n7\n", "\n8\n"), time), "invalid"),
        ("a timestamp above 2**63-1", relined(raw[:4] + (2**63).to_bytes(8, "big") + raw[12:]), "malformed"),
        ("a truncated line", relined(raw[:-1]), "malformed"),
        ("another key ID", relined(bytes(4) + raw[4:]), "malformed"),
    ]
    invalid = [
        {
            "name": name,
            "vkey": w1.verifier.to_string(),
            "checkpoint": text,
            "line": line,
            "expected": expected,
        }
        for name, line, expected in broken
    ]
    note = sign_note(text, log_signer)
    witnesses = {"w1": w1.verifier.to_string(), "w2": w2.verifier.to_string()}
    policy = WitnessPolicy.parse([f"{k}={v}" for k, v in witnesses.items()], 2)
    policy_cases = []
    for name, lines, threshold in [
        ("both witnesses", [good, w2.cosign(text, time)], 2),
        ("one of two, 2 needed", [good], 2),
        ("one of two, 1 needed", [good], 1),
        ("the same witness twice", [good, w1.cosign(text, time + 5)], 2),
        ("an unknown key with a known name", [stranger.cosign(text, time), w2.cosign(text, time)], 2),
        ("a bad cosignature by a known witness", [broken[1][1], w2.cosign(text, time)], 1),
    ]:
        cosigned = add_cosignatures(note, lines).decode("utf-8")
        case: dict[str, Any] = {
            "name": name,
            "note": cosigned,
            "witnesses": witnesses,
            "threshold": threshold,
        }
        try:
            result = WitnessPolicy(policy.witnesses, threshold).check(cosigned.encode("utf-8"))
        except Exception:
            case["expected"] = "bad cosignature"
        else:
            case.update(ok=result.ok, signed=list(result.signed), missing=list(result.missing))
        policy_cases.append(case)

    # One witness (w1), fresh state, the clock at `time`: each request in order, and the answer
    # tlog-witness ("add-checkpoint") requires, written here from the text, not from our witness.
    def cosigned(size: int) -> str:
        return w1.cosign(Checkpoint(log_signer.name, size, tree.root(size)).to_text(), time)

    other_key = Signer.from_seed(log_signer.name, bytes(32))
    requests: list[tuple[str, bytes, int, str | None]] = [
        ("a proof from 0 that is not empty", tree.body(0, 5, log_signer, [bytes(32)]), 422, None),
        ("first checkpoint, from 0", tree.body(0, 5, log_signer), 200, cosigned(5)),
        ("a stale old size", tree.body(0, 9, log_signer), 409, "5\n"),
        ("growth with a consistency proof", tree.body(5, 9, log_signer), 200, cosigned(9)),
        ("the same checkpoint again", tree.body(9, 9, log_signer), 200, cosigned(9)),
        ("a fork of the same size", fork.body(9, 9, log_signer), 422, None),
        ("a forked extension", fork.body(9, 12, log_signer), 422, None),
        ("a wrong proof", tree.body(9, 12, log_signer, [bytes(32)] * 2), 422, None),
        ("old size above the checkpoint", tree.body(10, 9, log_signer, []), 400, None),
        ("an unknown origin", tree.body(0, 5, Signer.from_seed("other.example/log", bytes(32))), 404, None),
        ("a signature by another key", tree.body(9, 12, other_key), 403, None),
        ("no old line", b"5\n\n" + tree.body(0, 5, log_signer).split(b"\n\n", 1)[1], 400, None),
        ("growth to 12", tree.body(9, 12, log_signer), 200, cosigned(12)),
    ]
    return {
        "version": VERSION,
        "description": (
            "Known-answer vectors of docs/witness.md (C2SP tlog-cosignature cosignature/v1 and "
            "tlog-witness add-checkpoint), generated by docs/vectors/generate.py. Never edit by hand."
        ),
        "log_vkey": log_signer.verifier.to_string(),
        "witnesses": [key(w1), key(w2)],
        "cosignatures": cosignatures,
        "invalid_cosignatures": invalid,
        "policies": policy_cases,
        "add_checkpoint": {
            "witness": "witness.example/w1",
            "time": time,
            "requests": [
                {"name": name, "body": _b64(body), "status": status, "answer": answer}
                for name, body, status, answer in requests
            ],
        },
    }


def tiles_vectors() -> dict[str, Any]:
    """Known answers of docs/log-format.md, "Tiles" (C2SP tlog-tiles)."""
    paths = [
        {"level": level, "index": index, "width": width, "path": tile_path(level, index, width)}
        for level, index, width in [(0, 0, 256), (0, 1234067, 256), (3, 1000, 256), (0, 273, 112), (1, 1, 17)]
    ] + [{"level": "entries", "index": 5, "width": 17, "path": tile_path("entries", 5, 17)}]
    trees = {
        str(size): [
            {"path": t.path, "width": t.width} for t in tiles_for(size) if t.width < 256 or t.level > 0
        ]
        for size in (1, 255, 256, 257, 65536, 70000)
    }
    entries = [b"tile vector entry %d" % i for i in range(600)]
    leaves = [merkle.leaf_hash(e) for e in entries]
    tiles = []
    for t in tiles_for(600):
        if t.level == 0:
            data = b"".join(leaves[t.index * 256 : t.index * 256 + t.width])
            bundle = encode_bundle(entries[t.index * 256 : t.index * 256 + t.width])
            tiles.append({"path": t.bundle_path, "sha256": hashlib.sha256(bundle).hexdigest()})
        else:
            data = b"".join(merkle.root(leaves[i * 256 : (i + 1) * 256]) for i in range(t.width))
        tiles.append({"path": t.path, "sha256": hashlib.sha256(data).hexdigest()})
    return {
        "version": VERSION,
        "description": (
            "Known-answer vectors of docs/log-format.md, 'Tiles' (C2SP tlog-tiles), generated by "
            "docs/vectors/generate.py. 'trees' lists the partial tiles (and tiles above level 0) of a "
            "tree of each size; 'log' is the tiled form of 600 entries. Never edit by hand."
        ),
        "paths": paths,
        "trees": trees,
        "log": {
            "entries": "tile vector entry N, for N = 0 to 599 (ASCII)",
            "size": 600,
            "root": merkle.root(leaves).hex(),
            "files": tiles,
        },
    }


def hand_proof_vectors() -> dict[str, Any]:
    """Known answers of docs/hand-proof.md: valid hand proofs, and broken ones with the step that fails."""
    signer = Signer.from_seed("example.com/fairdeck-hand-proofs", label_bytes("handproof/log key", 32))
    tree = _Tree(0)
    entries: list[bytes] = []
    hands = []
    for n, (deck, dealt) in enumerate([("standard", 12), ("jokers", 5), ("short", 9), ("shoe-8", 40)]):
        v = valid(
            f"hp-{deck}",
            "",
            deck,
            f"hp-{n}",
            seed_for(f"handproof/{n}", deck),
            [f"player seed {n}", b"\x07" * 32],
        )
        t = Transcript.from_dict(_transcript(v))
        commit_entry = CommitEntry(1_700_000_000_000 + n, t.hand_id, t.version, t.deck, t.commitment).encode()
        reveal_entry = RevealEntry(
            1_700_000_000_500 + n, t.hand_id, CLOSED, t.server_seed, t.client_seeds, deck_digest(t.cards)
        ).encode()
        hands.append((t, dealt, len(entries), len(entries) + 1))
        entries += [commit_entry, reveal_entry]
    for n, entry in enumerate(entries):
        tree.hashes += merkle.stored_hashes_for_append(n, merkle.leaf_hash(entry), tree.read)
    size = len(entries)
    note = sign_checkpoint(Checkpoint(signer.name, size, tree.root(size)), signer)

    def receipt(index: int) -> InclusionProof:
        return InclusionProof(
            index, size, tuple(merkle.prove_inclusion(index, size, tree.read)), entries[index], note
        )

    proofs = []
    for t, dealt, ci, ri in hands:
        proofs.append(
            HandProof(t, tuple(t.codes()[:dealt]), receipt(ci), receipt(ri), signer.verifier.to_string())
        )
    base = proofs[0].to_dict()

    def broken(name: str, step: str, change: Callable[[dict[str, Any]], None]) -> Vector:
        d = json.loads(json.dumps(base))
        change(d)
        return {"name": name, "step": step, "text": json.dumps(d, indent=2) + "\n"}

    def swap_first_two(d: dict[str, Any]) -> None:
        cards = d["transcript"]["cards"]
        cards[0], cards[1] = cards[1], cards[0]

    other_key = Signer.from_seed(signer.name, label_bytes("handproof/another key", 32))
    other_note = sign_checkpoint(Checkpoint(signer.name, size, tree.root(size)), other_key).decode()
    invalid = [
        broken("a format this verifier does not read", "format", lambda d: d.update(format=2)),
        broken("an extra name", "format", lambda d: d.update(extra=True)),
        broken("not a hand proof", "format", lambda d: d.update(type="fairdeck-transcript")),
        broken("a server seed that does not open the commitment", "commitment",
               lambda d: d["transcript"].update(server_seed="00" + d["transcript"]["server_seed"][2:])),
        broken("two cards swapped in the deck", "deck", swap_first_two),
        broken("a dealt card that is not the top of the deck", "cards",
               lambda d: d["dealt"].__setitem__(0, d["transcript"]["cards"][20])),
        broken("the commit receipt of another hand", "entries",
               lambda d: d.update(commit=proofs[1].to_dict()["commit"])),
        broken("a checkpoint signed by another key", "checkpoint",
               lambda d: [d[k].update(signed_checkpoint=other_note) for k in ("commit", "reveal")]),
        broken("a wrong hash in the reveal's audit path", "inclusion",
               lambda d: d["reveal"]["hashes"].__setitem__(0, _b64(bytes(32)))),
    ]  # fmt: skip
    duplicate = proofs[0].to_json().replace('"dealt": [', '"dealt": [], "dealt": [', 1)
    invalid.append({"name": "a duplicate name", "step": "format", "text": duplicate})
    return {
        "version": VERSION,
        "description": (
            "Known-answer vectors of docs/hand-proof.md, generated by docs/vectors/generate.py. Every "
            "'valid' proof verifies under 'log_key'; every 'invalid' one fails at 'step'. Never edit by hand."
        ),
        "log_key": signer.verifier.to_string(),
        "valid": [{"name": f"a {p.transcript.deck} hand", "text": p.to_json()} for p in proofs],
        "invalid": invalid,
    }


def build(valid_list: list[Vector] | None = None) -> dict[str, Any]:
    """The whole vectors document."""
    valid_list = valid_vectors() if valid_list is None else valid_list
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


def documents() -> dict[Path, str]:
    """Every file this script writes, with its exact text."""
    valid_list = valid_vectors()
    return {
        OUTPUT: render(build(valid_list)) + "\n",
        TEXTS_OUTPUT: render(text_vectors(valid_list)) + "\n",
        LOG_OUTPUT: render(log_vectors(valid_list)) + "\n",
        WITNESS_OUTPUT: render(witness_vectors()) + "\n",
        TILES_OUTPUT: render(tiles_vectors()) + "\n",
        HAND_PROOFS_OUTPUT: render(hand_proof_vectors()) + "\n",
    }


def main(argv: Sequence[str]) -> int:
    files = documents()
    if "--check" in argv:
        stale = [
            path
            for path, text in files.items()
            if not path.exists() or path.read_text(encoding="ascii") != text
        ]
        for path in stale:
            print(f"{path} differs from what {Path(__file__).name} generates", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, encoding="ascii")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
