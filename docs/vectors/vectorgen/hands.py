"""The valid hands of fairdeck-v1.json (docs/fairness-spec.md section 11): seeds derived from
fixed labels, the rejection sampling of spec section 4 replayed from the stream of section
3.2 to count the attempts (and checked against ``derive_deck``), and the hands whose
attempt count is wanted found by trying labels ``.../0``, ``.../1``, ... in order.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from fairdeck.core.commitment import commit
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.derivation import Stream, derive_deck
from fairdeck.core.encoding import lp, u32
from fairdeck.core.seeds import normalize_client_seeds, server_seed_length
from fairdeck.core.shuffle import shuffler

VERSION = "fairdeck-v1"
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


def transcript_of(vector: Vector) -> Vector:
    keys = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")
    return {key: vector[key] for key in keys}
