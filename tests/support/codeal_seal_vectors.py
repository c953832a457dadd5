"""The seal vectors of docs/vectors/fairdeck-codeal-seal-v1.json and the line a seat's device
prints for each (``device_line``); ``flipped_seal_cases`` makes seeded one-bit changes of them."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import decode_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.keys import KeyRecord, verify_key_record
from fairdeck.codeal.seal_statement import SealStatement, open_seat_card
from fairdeck.core.decks import DeckSpec

ROOT = Path(__file__).resolve().parents[2]
SEAL_VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-codeal-seal-v1.json").read_text())


def context(hand: dict[str, Any]) -> HandContext:
    spec = DeckSpec.parse(hand["deck"])
    records = [KeyRecord.decode(bytes.fromhex(k), i) for i, k in enumerate(hand["keys"])]
    for k, record in enumerate(records):
        verify_key_record(spec, hand["hand_id"], k, record)
    return HandContext(
        spec, hand["hand_id"], tuple(r.key for r in records), tuple(r.commitment for r in records)
    )


def device_line(case: dict[str, Any]) -> str:
    """What the seat's device says of one case, worded as the JavaScript words it."""
    hand = SEAL_VECTORS["hands"][case["hand"]]
    try:
        ctx = context(hand)
        final = decode_deck(bytes.fromhex(hand["final_deck"]), ctx.deck.size, "final deck")
        seals = [
            SealStatement(
                s["holder"],
                bytes.fromhex(s["seat_public_key"]),
                bytes.fromhex(s["sealed_share_sha256"]),
                bytes.fromhex(s["signature"]),
            )
            for s in case["seals"]
        ]
        card = open_seat_card(
            ctx,
            final,
            case["position"],
            [bytes.fromhex(s) for s in case["sealed"]],
            seals,
            bytes.fromhex(SEAL_VECTORS["seat_secret"]),
            [bytes.fromhex(k) for k in case["identity_keys"]],
        )
    except CodealError as e:
        return f"FAILED at step {e.step}: {e.detail}"
    return f"OK: position {case['position']} opens {ctx.deck.card_for_id(card).code}"


def flipped(hex_bytes: str, rng: random.Random) -> str:
    data = bytearray.fromhex(hex_bytes)
    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return data.hex()


def flipped_seal_cases(count: int, seed: int) -> list[dict[str, Any]]:
    """Cases of the file's form: one bit flipped anywhere in a valid case's relayed statements or
    sealed shares (the dealer's own sealed share included)."""
    rng = random.Random(seed)
    valid = [c for c in SEAL_VECTORS["cases"] if c["name"].startswith("valid")]
    cases = []
    for n in range(count):
        case = json.loads(json.dumps(rng.choice(valid)))
        if rng.random() < 0.6:
            seal = rng.choice(case["seals"])
            name = rng.choice(["seat_public_key", "sealed_share_sha256", "signature"])
            seal[name] = flipped(seal[name], rng)
        else:
            k = rng.randrange(len(case["sealed"]))
            case["sealed"][k] = flipped(case["sealed"][k], rng)
        case["name"] = f"flip {n}"
        cases.append(case)
    return cases
