"""Generate fairdeck-codeal-seal-v1.json: the seat's device's check of docs/codealing-spec.md 9.2.

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_codeal_seal.py           # (re)write the file
    python docs/vectors/generate_codeal_seal.py --check   # exit 1 if it differs from what this makes

Deterministic: every secret, seal and identity key comes from SHAKE-256 of a fixed label (Ed25519
signing is deterministic). Each case is one dealt position on one seat's device: every holder's
sealed share, the co-dealers' seal statements, and the line the device gives: "OK: position P opens
CODE" or "FAILED at step STEP: DETAIL". Vectors of a published version never change: add a file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import V, decode_deck, encode_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.keys import KeyRecord, new_holder
from fairdeck.codeal.local import codeal_local
from fairdeck.codeal.record import ShuffleRecord
from fairdeck.codeal.seal import seal_share, seat_public_key
from fairdeck.codeal.seal_statement import SealStatement, open_seat_card, seal_statement, sign_seal
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u64

OUTPUT = Path(__file__).with_name("fairdeck-codeal-seal-v1.json")
Vector = dict[str, Any]

FORMAT = (
    "hands: NAME -> {deck, hand_id, keys (K key records, hex), final_deck (the last shuffle record's "
    "64 n deck bytes, hex)}. seat_secret: the seat device's X25519 secret key. cases: {name, hand, "
    "position, sealed (K sealed shares, holder order, hex), seals (the co-dealers' statements as "
    "relayed: {holder, seat_public_key, sealed_share_sha256, signature}, hex), identity_keys (the "
    "Ed25519 keys the device pinned, holders 1..K-1, hex), line}. line is what the device says after "
    "section 9.2, then 9, 10.5 and 10.6 in that order: 'OK: position P opens CODE' (CODE: fairness "
    "spec 1.2) or 'FAILED at step STEP: DETAIL'. statement: the seal statement of the first case, "
    "its bytes (section 9.1) and its signature by co-dealer 1."
)


def drbg(label: str) -> Callable[[int], bytes]:
    counter = 0

    def read(n: int) -> bytes:
        nonlocal counter
        counter += 1
        return hashlib.shake_256(b"fairdeck codeal seal vectors\n" + label.encode() + u64(counter)).digest(n)

    return read


def line(hand: Vector, case: Vector, seat_secret: bytes) -> str:
    """The device's line (the reference: fairdeck.codeal.seal_statement.open_seat_card)."""
    spec = DeckSpec.parse(hand["deck"])
    records = [KeyRecord.decode(bytes.fromhex(k), i) for i, k in enumerate(hand["keys"])]
    ctx = HandContext(
        spec, hand["hand_id"], tuple(r.key for r in records), tuple(r.commitment for r in records)
    )
    final = decode_deck(bytes.fromhex(hand["final_deck"]), spec.size, "final deck")
    seals = [
        SealStatement(
            s["holder"],
            bytes.fromhex(s["seat_public_key"]),
            bytes.fromhex(s["sealed_share_sha256"]),
            bytes.fromhex(s["signature"]),
        )
        for s in case["seals"]
    ]
    sealed = [bytes.fromhex(s) for s in case["sealed"]]
    keys = [bytes.fromhex(k) for k in case["identity_keys"]]
    try:
        card = open_seat_card(ctx, final, case["position"], sealed, seals, seat_secret, keys)
    except CodealError as e:
        return f"FAILED at step {e.step}: {e.detail}"
    return f"OK: position {case['position']} opens {spec.card_for_id(card).code}"


def seal_json(s: SealStatement) -> Vector:
    return {
        "holder": s.holder,
        "seat_public_key": s.seat_key.hex(),
        "sealed_share_sha256": s.sealed_sha256.hex(),
        "signature": s.signature.hex(),
    }


def build() -> Vector:
    random = drbg("seat")
    seat_secret, house_secret = random(32), random(32)
    seat_pk, house_pk = seat_public_key(seat_secret), seat_public_key(house_secret)
    identities = [Ed25519PrivateKey.from_private_bytes(drbg(f"identity {k}")(32)) for k in (1, 2)]
    pinned = [i.public_key().public_bytes_raw().hex() for i in identities]
    stranger = Ed25519PrivateKey.from_private_bytes(drbg("stranger")(32))
    hands: dict[str, Vector] = {}
    made: dict[str, tuple[HandContext, list[list[bytes]]]] = {}
    for name, holders, hand_id in (("short-2", 2, "vec-seal-2"), ("short-3", 3, "vec-seal-3")):
        spec = DeckSpec.parse("short")
        r = drbg(f"hand {name}")
        secrets = [new_holder(spec, hand_id, k, r) for k in range(holders)]
        hand = codeal_local("short", hand_id, holders, [0, 1, 2], r, secrets=secrets)
        ctx = HandContext(
            spec, hand_id, tuple(s.record.key for s in secrets), tuple(s.record.commitment for s in secrets)
        )
        final = ShuffleRecord.decode(hand.shuffles[-1], spec.size, holders - 1).deck
        hands[name] = {
            "deck": "short",
            "hand_id": hand_id,
            "keys": [k.hex() for k in hand.keys],
            "final_deck": encode_deck(final).hex(),
        }
        made[name] = (ctx, [list(d.shares) for d in hand.dealt])
    r = drbg("seals")
    cases: list[Vector] = []

    def case(
        name: str, hand: str, p: int, sealed: Sequence[bytes], seals: Sequence[SealStatement], **extra: Any
    ) -> None:
        v = {
            "name": name,
            "hand": hand,
            "position": p,
            "sealed": [s.hex() for s in sealed],
            "seals": [seal_json(s) for s in seals],
            "identity_keys": extra.get("identity_keys", pinned[: len(made[hand][0].keys) - 1]),
        }
        v["line"] = line(hands[hand], v, seat_secret)
        cases.append(v)

    def honest(hand: str, p: int, to: bytes = seat_pk) -> tuple[list[bytes], list[SealStatement]]:
        ctx, shares = made[hand]
        sealed = [seal_share(ctx.deck, ctx.hand_id, p, k, s, to, r) for k, s in enumerate(shares[p])]
        return sealed, [sign_seal(identities[k - 1], ctx, p, k, to, sealed[k]) for k in range(1, len(sealed))]

    ctx2, shares2 = made["short-2"]
    for p in (0, 1):
        case(f"valid, position {p}", "short-2", p, *honest("short-2", p))
    for p in (0, 2):
        case(f"valid, three holders, position {p}", "short-3", p, *honest("short-3", p))
    # The attack: co-dealer 1 sealed to the house's key; the house read the card and resealed it.
    to_house, house_seals = honest("short-2", 0, house_pk)
    resealed, _ = honest("short-2", 0)
    case("sealed to the house's key, the genuine statement relayed", "short-2", 0, resealed, house_seals)
    case(
        "sealed to the house's key, the house's own sealed bytes relayed",
        "short-2",
        0,
        [resealed[0], to_house[1]],
        house_seals,
    )
    forged = SealStatement(
        1,
        seat_pk,
        hashlib.sha256(resealed[1]).digest(),
        stranger.sign(seal_statement(ctx2, 0, 1, seat_pk, hashlib.sha256(resealed[1]).digest())),
    )
    case("the house forges a statement naming the seat's key", "short-2", 0, resealed, [forged])
    case("no statement relayed", "short-2", 0, resealed, [])
    sealed0, seals0 = honest("short-2", 0)
    _, seals1 = honest("short-2", 1)
    case(
        "the statement of another position",
        "short-2",
        0,
        sealed0,
        [SealStatement(1, seat_pk, seals0[0].sealed_sha256, seals1[0].signature)],
    )
    other_ctx = HandContext(ctx2.deck, "vec-seal-other", ctx2.keys, ctx2.commitments)
    case(
        "the statement of another hand",
        "short-2",
        0,
        sealed0,
        [sign_seal(identities[0], other_ctx, 0, 1, seat_pk, sealed0[1])],
    )
    flipped = bytearray(seals0[0].signature)
    flipped[63] ^= 0x01
    case(
        "a flipped bit in the signature",
        "short-2",
        0,
        sealed0,
        [SealStatement(1, seat_pk, seals0[0].sealed_sha256, bytes(flipped))],
    )
    case(
        "a device that pinned another co-dealer",
        "short-2",
        0,
        sealed0,
        seals0,
        identity_keys=[stranger.public_key().public_bytes_raw().hex()],
    )
    again = seal_share(ctx2.deck, ctx2.hand_id, 0, 1, shares2[0][1], seat_pk, r)
    case(
        "the seat's key, but other sealed bytes than the ones signed",
        "short-2",
        0,
        [sealed0[0], again],
        seals0,
    )
    case(
        "a statement naming holder 0",
        "short-2",
        0,
        sealed0,
        [SealStatement(0, seat_pk, seals0[0].sealed_sha256, seals0[0].signature)],
    )
    case(
        "a 31-byte seat key in the statement",
        "short-2",
        0,
        sealed0,
        [SealStatement(1, seat_pk[:31], seals0[0].sealed_sha256, seals0[0].signature)],
    )
    case("two pinned keys for one co-dealer", "short-2", 0, sealed0, seals0, identity_keys=pinned)
    case("one sealed share for two holders", "short-2", 0, sealed0[1:], seals0)
    tampered = bytearray(sealed0[0])
    tampered[40] ^= 0x01
    case(
        "the dealer's own sealed share altered (it is not signed)",
        "short-2",
        0,
        [bytes(tampered), sealed0[1]],
        seals0,
    )
    wrong = seal_share(ctx2.deck, ctx2.hand_id, 0, 0, shares2[1][0], seat_pk, r)
    case("the dealer seals its share of another position", "short-2", 0, [wrong, sealed0[1]], seals0)
    s3, seals3 = honest("short-3", 1)
    _, house3 = honest("short-3", 1, house_pk)
    case("three holders, co-dealer 2 sealed to the house's key", "short-3", 1, s3, [seals3[0], house3[1]])
    case("three holders, statements out of order", "short-3", 1, s3, [seals3[1], seals3[0]])
    case("three holders, one pinned key", "short-3", 1, s3, seals3, identity_keys=pinned[:1])
    first = cases[0]
    example = seal_statement(
        made["short-2"][0],
        0,
        1,
        seat_pk,
        bytes.fromhex(first["seals"][0]["sealed_share_sha256"]),
    )
    return {
        "version": V,
        "spec": "docs/codealing-spec.md sections 9.1 and 9.2",
        "format": FORMAT,
        "seat_secret": seat_secret.hex(),
        "seat_public_key": seat_pk.hex(),
        "hands": hands,
        "cases": cases,
        "statement": {
            "hand": "short-2",
            "position": 0,
            "holder": 1,
            "seat_public_key": seat_pk.hex(),
            "sealed_share_sha256": first["seals"][0]["sealed_share_sha256"],
            "bytes": example.hex(),
            "signature": first["seals"][0]["signature"],
        },
    }


def main(argv: Sequence[str]) -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in argv:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.name} is stale: run python docs/vectors/generate_codeal_seal.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
