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

Parsing is strict: unknown magic or type, short fields and trailing bytes are
rejected.

>>> e = CommitEntry(1700000000000, "h1", "fairdeck-v1", "standard", bytes(32))
>>> decode(e.encode()) == e
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from fairdeck.encoding import lp, pack_cards, u32, u64
from fairdeck.errors import InvalidInput

MAGIC = b"FDL1"
COMMIT = 1
REVEAL = 2
CLOSED = 1
VOIDED = 2


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
    """Parse one entry strictly; raise EntryError."""
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise EntryError("log entry has an unknown format (magic)")
    kind = r.int(1)
    entry: Entry
    if kind == COMMIT:
        entry = CommitEntry(r.int(8), r.text(), r.text(), r.text(), r.field())
    elif kind == REVEAL:
        time_ms, hand_id, outcome, seed = r.int(8), r.text(), r.int(1), r.field()
        if outcome not in (CLOSED, VOIDED):
            raise EntryError(f"reveal entry has unknown outcome {outcome}")
        seeds = tuple(r.field() for _ in range(r.int(4)))
        entry = RevealEntry(time_ms, hand_id, outcome, seed, seeds, r.field())
    else:
        raise EntryError(f"log entry has unknown type {kind}")
    if r.pos != len(data):
        raise EntryError("log entry has trailing bytes")
    return entry
