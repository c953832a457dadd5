"""Generate fairdeck-codeal-v1.json: the known-answer vectors of docs/codealing-spec.md.

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_codeal.py           # (re)write docs/vectors/fairdeck-codeal-v1.json
    python docs/vectors/generate_codeal.py --check   # exit 1 if the file differs from what this produces

Deterministic: every secret and every proof nonce is drawn from SHAKE-256 of a fixed label. The file
holds card points and generators, each holder's derived shuffle, whole hands (valid), cases made
from a hand by a few edits (valid or not, each invalid one naming the step of spec section 10 that
rejects it) and sealed shares. Vectors of a published version never change: add, never alter.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import DST_CARD, DST_GEN, card_point, generators, initial_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import BASE, Point, Scalar, add, s_add, scalar, sub
from fairdeck.codeal.keys import HolderSecrets, KeyRecord, holder_from, new_holder
from fairdeck.codeal.local import codeal_local
from fairdeck.codeal.proof import prove_shuffle
from fairdeck.codeal.record import sign_shuffle
from fairdeck.codeal.seal import seal_share, seat_public_key
from fairdeck.codeal.shares import Share
from fairdeck.codeal.shuffle import (
    permutation,
    randomness,
    seed_commitment,
    shuffle_deck,
    shuffler_client_seed,
)
from fairdeck.codeal.verify import CodealHand, DealtPosition, verify_hand
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import u64

OUTPUT = Path(__file__).with_name("fairdeck-codeal-v1.json")
NON_CANONICAL = "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
IDENTITY = "00" * 32
TOO_BIG = "ff" * 32
Vector = dict[str, Any]


def drbg(label: str) -> Callable[[int], bytes]:
    """Bytes from SHAKE-256 of a fixed label and a counter: the vectors' only source of randomness."""
    counter = 0

    def read(n: int) -> bytes:
        nonlocal counter
        counter += 1
        return hashlib.shake_256(b"fairdeck codeal vectors\n" + label.encode() + u64(counter)).digest(n)

    return read


def holders(deck: str, hand_id: str, count: int, label: str) -> list[HolderSecrets]:
    random = drbg(label)
    return [new_holder(DeckSpec.parse(deck), hand_id, k, random) for k in range(count)]


def hand_json(hand: CodealHand) -> Vector:
    return {
        "deck": hand.deck,
        "hand_id": hand.hand_id,
        "keys": [k.hex() for k in hand.keys],
        "shuffles": [s.hex() for s in hand.shuffles],
        "dealt": [
            {"position": d.position, "card": d.card, "shares": [s.hex() for s in d.shares]}
            for d in hand.dealt
        ],
        "seeds": None if hand.seeds is None else [s.hex() for s in hand.seeds],
    }


def hand_from_json(v: Vector) -> CodealHand:
    return CodealHand(
        v["deck"],
        v["hand_id"],
        tuple(bytes.fromhex(k) for k in v["keys"]),
        tuple(bytes.fromhex(s) for s in v["shuffles"]),
        tuple(
            DealtPosition(d["position"], d["card"], tuple(bytes.fromhex(s) for s in d["shares"]))
            for d in v["dealt"]
        ),
        None if v["seeds"] is None else tuple(bytes.fromhex(s) for s in v["seeds"]),
    )


def apply_edits(hands: dict[str, Vector], base: str, edits: Sequence[Vector]) -> Vector:
    """A hand made from ``hands[base]`` by the edits of a case (the format is in the file's header)."""
    hand: Vector = json.loads(json.dumps(hands[base]))
    for e in edits:
        op, field = e["op"], str(e.get("field"))
        if op == "set":
            hand[field] = e["value"]
        elif op == "take":
            hand[field] = [hand[field][i] for i in e["indices"]]
        elif op == "from":
            hand[field] = hands[e["hand"]][field]
        elif op in ("overwrite", "cut"):
            holder, key = (
                (hand[field][e["index"]]["shares"], e["share"])
                if field == "dealt"
                else (hand[field], e["index"])
            )
            data, start = holder[key], 2 * e["offset"]
            if op == "overwrite":
                holder[key] = data[:start] + e["hex"] + data[start + len(e["hex"]) :]
            else:
                holder[key] = data[:start] + data[start + 2 * e["length"] :]
        elif op == "shares":
            hand["dealt"][e["index"]]["shares"] = [
                hand["dealt"][e["index"]]["shares"][i] for i in e["indices"]
            ]
        elif op == "card":
            hand["dealt"][e["index"]]["card"] = e["card"]
        else:
            raise ValueError(op)
    return hand


def outcome(hand: Vector) -> str | None:
    try:
        verify_hand(hand_from_json(hand))
    except CodealError as error:
        return error.step
    return None


def derivations() -> list[Vector]:
    out = []
    for deck, hand_id, k in (
        ("short", "vec-short-2", 0),
        ("short", "vec-short-2", 1),
        ("standard", "vec-holdem", 1),
    ):
        spec = DeckSpec.parse(deck)
        seed = drbg(f"derivation/{deck}/{k}")(45 if deck == "standard" else 34)
        out.append(
            {
                "deck": deck,
                "hand_id": hand_id,
                "k": k,
                "seed": seed.hex(),
                "commitment": seed_commitment(spec, hand_id, k, seed).hex(),
                "client_seed": shuffler_client_seed(k).hex(),
                "psi": list(permutation(spec, hand_id, k, seed)),
                "randomness": [r.hex() for r in randomness(spec, hand_id, k, seed)],
            }
        )
    return out


def constructed_record(
    deck: str,
    hand_id: str,
    secrets: list[HolderSecrets],
    k: int,
    rs: Sequence[Scalar] | None,
    signer: int,
    label: str,
) -> str:
    """Holder ``k``'s record when it (or the signer) cheats on the randomness or the signature."""
    spec = DeckSpec.parse(deck)
    ctx = HandContext(
        spec, hand_id, tuple(s.record.key for s in secrets), tuple(s.record.commitment for s in secrets)
    )
    random = drbg(label)
    before = initial_deck(spec)
    for j in range(k):
        psi, r = permutation(spec, hand_id, j, secrets[j].seed), randomness(spec, hand_id, j, secrets[j].seed)
        before = shuffle_deck(before, psi, r, ctx.joint_key)
    psi = permutation(spec, hand_id, k, secrets[k].seed)
    rs = rs or randomness(spec, hand_id, k, secrets[k].seed)
    after = shuffle_deck(before, psi, rs, ctx.joint_key)
    proof = prove_shuffle(ctx, k, before, after, psi, rs, random)
    return sign_shuffle(ctx, k, before, after, proof, secrets[signer].x, random).encode().hex()


def build() -> Vector:
    spec36 = DeckSpec.parse("short")
    short = holders("short", "vec-short-2", 2, "holders/short-2")
    other = [holder_from(spec36, "vec-other", h.k, h.x, h.seed, drbg("holders/other")) for h in short]
    hands = {
        "holdem-9-seats": codeal_local(
            "standard",
            "vec-holdem",
            2,
            range(23),
            drbg("hand/holdem"),
            secrets=holders("standard", "vec-holdem", 2, "holders/holdem"),
        ),
        "short-3-holders": codeal_local(
            "short",
            "vec-short-3",
            3,
            [0, 5, 35],
            drbg("hand/short-3"),
            secrets=holders("short", "vec-short-3", 3, "holders/short-3"),
        ),
        "short-2": codeal_local("short", "vec-short-2", 2, [0, 1], drbg("hand/short-2"), secrets=short),
        "short-2-other-hand": codeal_local("short", "vec-other", 2, [0], drbg("hand/other"), secrets=other),
    }
    json_hands = {name: hand_json(h) for name, h in hands.items()}
    base = json_hands["short-2"]
    share = Share.decode(bytes.fromhex(base["dealt"][0]["shares"][1]), "share")
    record = KeyRecord.decode(bytes.fromhex(base["keys"][1]), 1)
    rogue_known = holder_from(spec36, "vec-short-2", 1, scalar(424242), short[1].seed, drbg("rogue"))
    rogue = KeyRecord(
        sub(rogue_known.record.key, short[0].record.key),
        rogue_known.record.t,
        rogue_known.record.s,
        rogue_known.record.commitment,
    )
    record_len = len(bytes.fromhex(base["shuffles"][1]))
    s1_offset = 4 + 64 * 36 + 32 * (3 * 36 + 5)
    cases: list[tuple[str, list[Vector], str | None]] = [
        ("seeds withheld (during the hand)", [{"op": "set", "field": "seeds", "value": None}], None),
        ("no card dealt yet", [{"op": "take", "field": "dealt", "indices": []}], None),
        (
            "a key not canonically encoded",
            [{"op": "overwrite", "field": "keys", "index": 1, "offset": 0, "hex": NON_CANONICAL}],
            "encoding",
        ),
        (
            "the identity as a proof-of-possession commitment",
            [{"op": "overwrite", "field": "keys", "index": 0, "offset": 32, "hex": IDENTITY}],
            "encoding",
        ),
        (
            "the identity as c1 in a shuffled deck",
            [{"op": "overwrite", "field": "shuffles", "index": 0, "offset": 4, "hex": IDENTITY}],
            "encoding",
        ),
        (
            "a proof scalar not below L",
            [{"op": "overwrite", "field": "shuffles", "index": 1, "offset": record_len - 96, "hex": TOO_BIG}],
            "encoding",
        ),
        (
            "a share scalar not below L",
            [{"op": "overwrite", "field": "dealt", "index": 0, "share": 0, "offset": 96, "hex": TOO_BIG}],
            "encoding",
        ),
        (
            "a shuffle record one card short",
            [{"op": "cut", "field": "shuffles", "index": 1, "offset": 4, "length": 64}],
            "encoding",
        ),
        (
            "the records of a short deck claimed for a standard one",
            [{"op": "set", "field": "deck", "value": "standard"}],
            "encoding",
        ),
        (
            "a hand id outside the hand-id alphabet",
            [{"op": "set", "field": "hand_id", "value": "vec short 2"}],
            "encoding",
        ),
        (
            "one key holder only",
            [
                {"op": "take", "field": "keys", "indices": [0]},
                {"op": "take", "field": "shuffles", "indices": [0]},
            ],
            "encoding",
        ),
        (
            "a proof of possession with a wrong response",
            [
                {
                    "op": "overwrite",
                    "field": "keys",
                    "index": 1,
                    "offset": 64,
                    "hex": s_add(record.s, scalar(1)).hex(),
                }
            ],
            "key",
        ),
        (
            "a rogue key that cancels the dealer's",
            [{"op": "set", "field": "keys", "value": [base["keys"][0], rogue.encode().hex()]}],
            "key",
        ),
        ("the dealer's key record twice", [{"op": "take", "field": "keys", "indices": [0, 0]}], "key"),
        (
            "the co-dealer's shuffle skipped",
            [{"op": "take", "field": "shuffles", "indices": [0]}],
            "transcript",
        ),
        (
            "the shuffles in the wrong order",
            [{"op": "take", "field": "shuffles", "indices": [1, 0]}],
            "transcript",
        ),
        (
            "a dealt position with one share missing",
            [{"op": "shares", "index": 0, "indices": [0]}],
            "transcript",
        ),
        ("a position dealt twice", [{"op": "take", "field": "dealt", "indices": [0, 0]}], "transcript"),
        (
            "a proof of shuffle with a wrong response",
            [
                {
                    "op": "overwrite",
                    "field": "shuffles",
                    "index": 1,
                    "offset": s1_offset,
                    "hex": scalar(5).hex(),
                }
            ],
            "shuffle",
        ),
        (
            "a malleated ciphertext (c2 + B) in the final deck",
            [
                {
                    "op": "overwrite",
                    "field": "shuffles",
                    "index": 1,
                    "offset": 36,
                    "hex": add(Point(bytes.fromhex(base["shuffles"][1])[36:68]), BASE).hex(),
                }
            ],
            "shuffle",
        ),
        (
            "shuffles replayed from another hand with the same keys and seeds",
            [
                {"op": "from", "field": "shuffles", "hand": "short-2-other-hand"},
                {"op": "take", "field": "dealt", "indices": []},
            ],
            "shuffle",
        ),
        (
            "the co-dealer re-encrypting with randomness zero",
            [
                {
                    "op": "set",
                    "field": "shuffles",
                    "value": [
                        base["shuffles"][0],
                        constructed_record("short", "vec-short-2", short, 1, [scalar(0)] * 36, 1, "zero"),
                    ],
                },
                {"op": "take", "field": "dealt", "indices": []},
            ],
            "shuffle",
        ),
        (
            "the dealer running the co-dealer's shuffle and signing it",
            [
                {
                    "op": "set",
                    "field": "shuffles",
                    "value": [
                        base["shuffles"][0],
                        constructed_record("short", "vec-short-2", short, 1, None, 0, "stolen"),
                    ],
                },
                {"op": "take", "field": "dealt", "indices": []},
            ],
            "shuffle",
        ),
        (
            "a share with a wrong response",
            [
                {
                    "op": "overwrite",
                    "field": "dealt",
                    "index": 0,
                    "share": 1,
                    "offset": 96,
                    "hex": s_add(share.z, scalar(1)).hex(),
                }
            ],
            "share",
        ),
        (
            "a share shifted to open another card",
            [
                {
                    "op": "overwrite",
                    "field": "dealt",
                    "index": 0,
                    "share": 1,
                    "offset": 0,
                    "hex": add(share.d, BASE).hex(),
                }
            ],
            "share",
        ),
        (
            "a dealt card claimed as another",
            [{"op": "card", "index": 0, "card": base["dealt"][1]["card"]}],
            "open",
        ),
        (
            "a seed that does not open its commitment",
            [{"op": "overwrite", "field": "seeds", "index": 1, "offset": 0, "hex": "00"}],
            "seed",
        ),
        (
            "a seed of the wrong length",
            [{"op": "cut", "field": "seeds", "index": 0, "offset": 0, "length": 1}],
            "seed",
        ),
        (
            "the co-dealer reusing one randomness, found at the reveal",
            [
                {
                    "op": "set",
                    "field": "shuffles",
                    "value": [
                        base["shuffles"][0],
                        constructed_record("short", "vec-short-2", short, 1, [scalar(7)] * 36, 1, "reused"),
                    ],
                },
                {"op": "take", "field": "dealt", "indices": []},
            ],
            "seed",
        ),
        (
            "a dealt position given as false, not as the number 0",
            [{"op": "set", "field": "dealt", "value": [{**base["dealt"][0], "position": False}]}],
            "transcript",
        ),
        (
            "a key with bit 255 set: the same point, not its canonical encoding",
            [
                {
                    "op": "overwrite",
                    "field": "keys",
                    "index": 1,
                    "offset": 31,
                    "hex": high_bit(base["keys"][1], 31),
                }
            ],
            "encoding",
        ),
        (
            "a shuffled c1 with bit 255 set: the same point, not its canonical encoding",
            [
                {
                    "op": "overwrite",
                    "field": "shuffles",
                    "index": 1,
                    "offset": 4 + 31,
                    "hex": high_bit(base["shuffles"][1], 4 + 31),
                }
            ],
            "encoding",
        ),
    ]
    edited = []
    for name, edits, step in cases:
        got = outcome(apply_edits(json_hands, "short-2", edits))
        assert got == step, (name, got, step)
        edited.append({"name": name, "base": "short-2", "edits": edits, "valid": step is None, "step": step})
    for name, hand in json_hands.items():
        assert outcome(hand) is None, name
    return {
        "version": "fairdeck-codeal-v1",
        "format": (
            "hash_to_point: msg, dst (hex) and the point. cards: card id and P_c; generators: j and G_j. "
            "derivations: one holder's seed, commitment, client seed, psi (output position i takes input "
            "position psi[i]) and r_i. hands: whole co-dealt hands that verify (section 10). cases: a hand "
            "made from hands[base] by edits, applied in order: set (field = value), take (field = "
            "[field[i] for i in indices]), from (field = hands[hand][field]), overwrite (write hex at byte "
            "offset of field[index], or of dealt[index].shares[share]), cut (remove length bytes at offset), "
            "shares (dealt[index].shares = [shares[i] for i in indices]), card (dealt[index].card = card); "
            "valid, and the step that rejects it. seals: a share sealed to a seat, and what opening gives."
        ),
        "hash_to_point": [
            {"dst": DST_CARD.decode(), "msg": "00000000", "point": card_point(0).hex()},
            {"dst": DST_GEN.decode(), "msg": "00000000", "point": generators(0)[0].hex()},
        ],
        "cards": [{"id": c, "point": card_point(c).hex()} for c in [*range(54), 415]],
        "generators": [{"j": j, "point": g.hex()} for j, g in enumerate(generators(52))],
        "derivations": derivations(),
        "hands": json_hands,
        "cases": edited,
        "seals": seals(json_hands["short-2"]),
    }


def high_bit(hex_bytes: str, offset: int) -> str:
    """The byte at ``offset`` with bit 7 set, as hex: bit 255 of the point that ends there."""
    return f"{bytes.fromhex(hex_bytes)[offset] | 0x80:02x}"


def seals(base: Vector) -> list[Vector]:
    spec, random = DeckSpec.parse("short"), drbg("seals")
    seat, stranger = random(32), random(32)
    share = bytes.fromhex(base["dealt"][0]["shares"][1])
    sealed = seal_share(spec, base["hand_id"], 0, 1, share, seat_public_key(seat), random)
    tampered = sealed[:40] + bytes([sealed[40] ^ 1]) + sealed[41:]
    common = {"deck": "short", "hand_id": base["hand_id"], "holder": 1}
    return [
        {
            **common,
            "position": 0,
            "seat_secret": seat.hex(),
            "sealed": sealed.hex(),
            "share": share.hex(),
            "step": None,
        },
        {
            **common,
            "position": 0,
            "seat_secret": stranger.hex(),
            "sealed": sealed.hex(),
            "share": None,
            "step": "seal",
        },
        {
            **common,
            "position": 1,
            "seat_secret": seat.hex(),
            "sealed": sealed.hex(),
            "share": None,
            "step": "seal",
        },
        {
            **common,
            "position": 0,
            "seat_secret": seat.hex(),
            "sealed": tampered.hex(),
            "share": None,
            "step": "seal",
        },
    ]


def main(argv: Sequence[str]) -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in argv:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT.name} is stale: run python docs/vectors/generate_codeal.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
