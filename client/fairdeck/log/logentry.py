"""Transparency-log entries: the binary encoding of a commitment or a reveal.

Each entry is one leaf of the log: a commit (``CommitEntry``) or a reveal (``RevealEntry``,
with how the hand ended and ``deck_digest``, the SHA-256 of the whole dealt deck). The layout
and every parsing rule are docs/log-format.md, "Entries" and "Parsing"; ``decode`` is strict,
field by field, as that list says. The server seed's length depends on the hand's deck, so the
audit checks it against the hand's commit entry, not the parser.

>>> e = CommitEntry(1700000000000, "h1", "fairdeck-v1", "standard", bytes(32))
>>> decode(e.encode()) == e
True
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from fairdeck.core.decks import SPEC_NAMES
from fairdeck.core.encoding import lp, pack_cards, u32, u64
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import MAX_CLIENT_SEED_BYTES, MAX_CLIENT_SEEDS, MAX_HAND_ID_LENGTH, check_hand_id
from fairdeck.core.versions import SUPPORTED_VERSIONS

MAGIC = b"FDL1"
COMMIT = 1
REVEAL = 2
CLOSED = 1
VOIDED = 2
DIGEST_BYTES = 32  # the commitment and the deck digest are SHA-256 digests


class EntryError(InvalidInput):
    """Bytes that are not a well-formed log entry."""


@dataclass(frozen=True)
class CommitEntry:
    """The dealer committed to a hand's server seed."""

    time_ms: int
    hand_id: str
    version: str
    deck: str
    commitment: bytes

    def encode(self) -> bytes:
        return b"".join(
            [
                MAGIC,
                bytes([COMMIT]),
                u64(self.time_ms),
                lp(self.hand_id.encode("ascii")),
                lp(self.version.encode("ascii")),
                lp(self.deck.encode("ascii")),
                lp(self.commitment),
            ]
        )


@dataclass(frozen=True)
class RevealEntry:
    """The dealer revealed a hand's server seed and the client seeds used."""

    time_ms: int
    hand_id: str
    outcome: int
    """CLOSED or VOIDED."""
    server_seed: bytes
    client_seeds: tuple[bytes, ...]
    deck_digest: bytes

    def encode(self) -> bytes:
        return b"".join(
            [
                MAGIC,
                bytes([REVEAL]),
                u64(self.time_ms),
                lp(self.hand_id.encode("ascii")),
                bytes([self.outcome]),
                lp(self.server_seed),
                u32(len(self.client_seeds)),
                *(lp(seed) for seed in self.client_seeds),
                lp(self.deck_digest),
            ]
        )


def commit_entries(
    time_ms: int, hand_ids: Sequence[str], version: str, deck: str, commitments: Sequence[bytes]
) -> list[bytes]:
    """``CommitEntry(time_ms, h, version, deck, c).encode()`` for each hand, the shared fields
    encoded once (a dealer's batch of hands)."""
    head = MAGIC + bytes([COMMIT]) + u64(time_ms)
    middle = lp(version.encode("ascii")) + lp(deck.encode("ascii"))
    return [head + lp(h.encode("ascii")) + middle + lp(c) for h, c in zip(hand_ids, commitments, strict=True)]


def reveal_entries(
    time_ms: int,
    hand_ids: Sequence[str],
    outcome: int,
    server_seeds: Sequence[bytes],
    client_seeds: tuple[bytes, ...],
    digests: Sequence[bytes],
) -> list[bytes]:
    """``RevealEntry(time_ms, h, outcome, s, client_seeds, d).encode()`` for each hand, the
    shared fields encoded once."""
    head = MAGIC + bytes([REVEAL]) + u64(time_ms)
    clients = u32(len(client_seeds)) + b"".join(lp(seed) for seed in client_seeds)
    mark = bytes([outcome])
    return [
        head + lp(h.encode("ascii")) + mark + lp(s) + clients + lp(d)
        for h, s, d in zip(hand_ids, server_seeds, digests, strict=True)
    ]


def deck_digest(cards: Sequence[int]) -> bytes:
    """SHA-256 over the card ids as 2-byte big-endian integers, top card first."""
    return hashlib.sha256(pack_cards(cards)).digest()


Entry = CommitEntry | RevealEntry

TIME_AT = slice(5, 13)
"""Where ``time_ms`` is in every entry: after the magic and the type byte. A log's writer keeps
entry times from going backwards by raising these 8 bytes (big-endian, so they compare as the
numbers do) to the latest entry's (docs/operations.md, "The dealer's clock").

>>> e = CommitEntry(5, "h1", "fairdeck-v1", "standard", bytes(32)).encode()
>>> time_of(e), e[TIME_AT] < u64(7)
(5, True)
"""


def time_of(entry: bytes) -> int | None:
    """The ``time_ms`` of an encoded entry (of either type), without parsing the rest; None for
    bytes that are not an entry of this format."""
    if len(entry) < TIME_AT.stop or not entry.startswith(MAGIC):
        return None
    return int.from_bytes(entry[TIME_AT], "big")


_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def _field(data: bytes, at: int) -> tuple[bytes, int]:
    """The length-prefixed field at ``at``, and where the next one starts."""
    end = at + 4
    if end > len(data):
        raise EntryError("log entry is truncated")
    stop = end + _U32.unpack_from(data, at)[0]
    if stop > len(data):
        raise EntryError("log entry is truncated")
    return data[end:stop], stop


def _text(data: bytes, at: int) -> tuple[str, int]:
    raw, at = _field(data, at)
    try:
        return raw.decode("ascii"), at
    except UnicodeDecodeError:
        raise EntryError("log entry text field is not ASCII") from None


def decode(data: bytes) -> Entry:
    """Parse one entry strictly (docs/log-format.md, "Parsing"); raise EntryError.

    One pass over offsets (``struct``), field by field in the layout's order: the auditor parses
    millions of entries, so this is written for speed, with every check of the layout kept."""
    if len(data) < 4:
        raise EntryError("log entry is truncated")
    if data[:4] != MAGIC:
        raise EntryError("log entry has an unknown format (magic)")
    if len(data) < 5:
        raise EntryError("log entry is truncated")
    kind = data[4]
    if kind not in (COMMIT, REVEAL):
        raise EntryError(f"log entry has unknown type {kind}")
    if len(data) < 13:
        raise EntryError("log entry is truncated")
    time_ms = _U64.unpack_from(data, 5)[0]
    hand_id, at = _text(data, 13)
    hand_id = _hand_id(hand_id)
    entry: Entry
    if kind == COMMIT:
        version, at = _text(data, at)
        deck, at = _text(data, at)
        if version not in SUPPORTED_VERSIONS:
            raise EntryError("commit entry names an unknown algorithm version")
        if deck not in SPEC_NAMES:
            raise EntryError("commit entry names an unknown deck spec")
        commitment, at = _field(data, at)
        entry = CommitEntry(time_ms, hand_id, version, deck, _digest(commitment, "commitment"))
    else:
        if at + 1 > len(data):
            raise EntryError("log entry is truncated")
        outcome = data[at]
        seed, at = _field(data, at + 1)
        if outcome not in (CLOSED, VOIDED):
            raise EntryError(f"reveal entry has unknown outcome {outcome}")
        if at + 4 > len(data):
            raise EntryError("log entry is truncated")
        count = _U32.unpack_from(data, at)[0]
        at += 4
        if count > MAX_CLIENT_SEEDS:
            raise EntryError(f"reveal entry has {count} client seeds, at most {MAX_CLIENT_SEEDS}")
        seeds = []
        for _ in range(count):
            client_seed, at = _field(data, at)
            seeds.append(client_seed)
        if any(not 1 <= len(seed) <= MAX_CLIENT_SEED_BYTES for seed in seeds):
            raise EntryError(f"reveal entry has a client seed outside 1..{MAX_CLIENT_SEED_BYTES} bytes")
        digest, at = _field(data, at)
        entry = RevealEntry(time_ms, hand_id, outcome, seed, tuple(seeds), _digest(digest, "deck digest"))
    if at != len(data):
        raise EntryError("log entry has trailing bytes")
    return entry


def _hand_id(hand_id: str) -> str:
    try:
        check_hand_id(hand_id)
    except InvalidInput:
        raise EntryError(f"log entry hand id is not 1..{MAX_HAND_ID_LENGTH} of A-Z a-z 0-9 . _ : -") from None
    return hand_id


def _digest(value: bytes, what: str) -> bytes:
    if len(value) != DIGEST_BYTES:
        raise EntryError(f"log entry {what} is {len(value)} bytes, want {DIGEST_BYTES}")
    return value
