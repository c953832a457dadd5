"""The invalid transcripts of fairdeck-v1.json, each with the step of docs/fairness-spec.md
section 6 (or 7) that must reject it: version, malformed, commitment, deck. Each is one
change from a valid hand of hands.py; new cases are appended, so none moves.
"""

from __future__ import annotations

from typing import Any

from fairdeck.core.commitment import commit
from fairdeck.core.decks import DeckSpec

from .hands import VERSION, Vector, label_bytes, transcript_of


def invalid_vectors(valid_list: list[Vector]) -> list[Vector]:
    by_name = {v["name"]: v for v in valid_list}
    base = transcript_of(by_name["standard/one-client-seed"])
    shoe = transcript_of(by_name["shoe-2/one-client-seed"])
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
    short = transcript_of(by_name["short/one-client-seed"])
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
            transcript_of(by_name["shoe-1/same-inputs-as-standard"]),
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
    several = transcript_of(by_name["standard/several-client-seeds"])
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
        edit(transcript_of(by_name["standard/nfc-decomposed"]), client_seeds=["65cc81"]),
    )
    bad(
        "deck/cards-of-other-deck-spec",
        "deck",
        "standard/zero-server-seed's cards under shoe-1's inputs, rewritten in shoe form",
        edit(
            transcript_of(by_name["shoe-1/same-inputs-as-standard"]),
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
