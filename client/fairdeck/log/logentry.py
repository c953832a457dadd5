"""Transparency-log entries: the binary encoding of a commitment or a reveal.

Each entry is one leaf of the log (docs/log-format.md). Layout, all integers
big-endian, ``lp`` = 4-byte length prefix:

- commit: ``"FDL1" || u8(1) || u64(time_ms) || lp(hand_id) || lp(version) || lp(deck) || lp(commitment)``
- reveal: ``"FDL1" || u8(2) || u64(time_ms) || lp(hand_id) || u8(outcome) || lp(server_seed)
  || u32(k) || lp(client_seed_1) .. lp(client_seed_k) || lp(deck_digest)``

``outcome`` is 1 for a hand closed by its game server, 2 for one the dealer
voided after the maximum hand lifetime. ``deck_digest`` is SHA-256 over the
dealt deck as 2-byte big-endian card ids, top card first
(``deck_digest(cards)``): the auditor re-derives the deck from the seeds and
checks the dealer dealt exactly that.

Parsing is strict, field by field as docs/log-format.md ("Parsing") lists:
the magic, the type and the outcome; the hand id follows the hand-id rule of
the fairness spec (ASCII, 1 to 64 of ``A-Z a-z 0-9 . _ : -``); a commit names
an algorithm version this reader implements and a deck spec of it, and a
32-byte commitment; a reveal has at most 64 client seeds of 1 to 256 bytes and
a 32-byte deck digest; no length runs past the end and nothing trails. The
server seed's length depends on the hand's deck, so the audit checks it
against the hand's commit entry, not the parser.

>>> e = CommitEntry(1700000000000, "h1", "fairdeck-v1", "standard", bytes(32))
>>> decode(e.encode()) == e
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from fairdeck.core.decks import SPEC_NAMES
from fairdeck.core.encoding import lp, pack_cards, u32, u64
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import MAX_CLIENT_SEED_BYTES, MAX_CLIENT_SEEDS, MAX_HAND_ID_LENGTH, check_hand_id
from fairdeck.core.versions import check_version

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


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise EntryError("log entry is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big")

    def field(self) -> bytes:
        return self.take(self.int(4))

    def text(self) -> str:
        raw = self.field()
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise EntryError("log entry text field is not ASCII") from None


def decode(data: bytes) -> Entry:
    """Parse one entry strictly (docs/log-format.md, "Parsing"); raise EntryError."""
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise EntryError("log entry has an unknown format (magic)")
    kind = r.int(1)
    entry: Entry
    if kind == COMMIT:
        time_ms, hand_id, version, deck = r.int(8), _hand_id(r.text()), r.text(), r.text()
        try:
            check_version(version)
        except InvalidInput:
            raise EntryError("commit entry names an unknown algorithm version") from None
        if deck not in SPEC_NAMES:
            raise EntryError("commit entry names an unknown deck spec")
        entry = CommitEntry(time_ms, hand_id, version, deck, _digest(r.field(), "commitment"))
    elif kind == REVEAL:
        time_ms, hand_id, outcome, seed = r.int(8), _hand_id(r.text()), r.int(1), r.field()
        if outcome not in (CLOSED, VOIDED):
            raise EntryError(f"reveal entry has unknown outcome {outcome}")
        count = r.int(4)
        if count > MAX_CLIENT_SEEDS:
            raise EntryError(f"reveal entry has {count} client seeds, at most {MAX_CLIENT_SEEDS}")
        seeds = tuple(r.field() for _ in range(count))
        if any(not 1 <= len(seed) <= MAX_CLIENT_SEED_BYTES for seed in seeds):
            raise EntryError(f"reveal entry has a client seed outside 1..{MAX_CLIENT_SEED_BYTES} bytes")
        entry = RevealEntry(time_ms, hand_id, outcome, seed, seeds, _digest(r.field(), "deck digest"))
    else:
        raise EntryError(f"log entry has unknown type {kind}")
    if r.pos != len(data):
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
