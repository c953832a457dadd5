"""The co-dealt log entries of docs/codealing-spec.md section 11: setup, shuffle, shares, seeds, seals.

Type bytes 3 to 7 after ``"FDL1"``, assigned in docs/log-format.md ("Co-dealt entries") and pinned
by docs/vectors/fairdeck-codeal-log-v1.json (3 to 6) and fairdeck-codeal-seals-log-v1.json (7).
``decode_entry`` is strict: exact lengths, no trailing bytes, a hand id by the hand-id rule,
``2 <= K <= 16``, a seals entry's holder ``1..15``, fixed-size records of their exact size.
It checks bytes, not cryptography: ``verify_hand`` does that. The dealer appends these entries to
its log (fairdeck_server.dealing.codeal_log: setup and shuffles at the open, shares and seeds at the close)
and ``fairdeck audit`` checks each hand's entries with them (fairdeck.codeal.log_audit).
"""

from __future__ import annotations

from dataclasses import dataclass

from fairdeck.codeal.context import MAX_HOLDERS, MIN_HOLDERS
from fairdeck.codeal.elgamal import V
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.keys import KEY_RECORD_BYTES
from fairdeck.codeal.shares import SHARE_BYTES
from fairdeck.core.encoding import lp, u32, u64
from fairdeck.core.seeds import SeedError, check_hand_id

MAGIC = b"FDL1"
SETUP, SHUFFLE, SHARES, SEEDS, SEALS = 3, 4, 5, 6, 7
SEAL_BYTES = 4 + 32 + 32 + 64
"""One seal of a seals entry: u32(p) || seat_pk || SHA-256(sealed) || signature (section 11)."""


@dataclass(frozen=True)
class CodealEntry:
    """One co-dealt entry: ``kind`` 3 to 7 and the fields that kind has (others empty)."""

    kind: int
    time_ms: int
    hand_id: str
    deck: str = ""
    records: tuple[bytes, ...] = ()
    """Setup: the K key records. Shuffle: the one shuffle record. Shares: the K shares. Seeds: the K
    seeds. Seals: the m seals, ``SEAL_BYTES`` each (``seals()`` splits them)."""
    position: int = 0
    """Shares: the position. Seals: the co-dealer ``k`` whose statements they are."""

    def seals(self) -> list[tuple[int, bytes, bytes, bytes]]:
        """A seals entry's (position, seat key, SHA-256 of the sealed share, signature), in order."""
        return [(int.from_bytes(r[:4], "big"), r[4:36], r[36:68], r[68:]) for r in self.records]

    def encode(self) -> bytes:
        head = MAGIC + bytes([self.kind]) + u64(self.time_ms) + lp(self.hand_id.encode("ascii"))
        if self.kind == SETUP:
            return (
                head
                + lp(V.encode())
                + lp(self.deck.encode("ascii"))
                + u32(len(self.records))
                + b"".join(self.records)
            )
        if self.kind == SHUFFLE:
            return head + lp(self.records[0])
        if self.kind == SHARES:
            return head + u32(self.position) + u32(len(self.records)) + b"".join(self.records)
        if self.kind == SEEDS:
            return head + u32(len(self.records)) + b"".join(lp(s) for s in self.records)
        if self.kind == SEALS:
            return head + u32(self.position) + u32(len(self.records)) + b"".join(self.records)
        raise ValueError(f"not a co-dealt entry type: {self.kind}")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise CodealError("encoding", f"log entry: {what} runs past the end")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def number(self, n: int, what: str) -> int:
        return int.from_bytes(self.take(n, what), "big")

    def lp(self, what: str) -> bytes:
        return self.take(self.number(4, what), what)

    def holders(self) -> int:
        k = self.number(4, "K")
        if not MIN_HOLDERS <= k <= MAX_HOLDERS:
            raise CodealError("encoding", f"log entry: K must be {MIN_HOLDERS} to {MAX_HOLDERS}, not {k}")
        return k


def decode_entry(data: bytes) -> CodealEntry:
    """The entry, or CodealError("encoding") naming what is wrong."""
    r = _Reader(data)
    if r.take(4, "magic") != MAGIC:
        raise CodealError("encoding", 'log entry: want "FDL1"')
    kind = r.number(1, "type")
    if kind not in (SETUP, SHUFFLE, SHARES, SEEDS, SEALS):
        raise CodealError("encoding", f"log entry: type {kind} is not a co-dealt entry (3 to 7)")
    time_ms = r.number(8, "time")
    try:
        hand_id = r.lp("hand id").decode("ascii")
        check_hand_id(hand_id)
    except (UnicodeDecodeError, SeedError):
        raise CodealError("encoding", "log entry: the hand id breaks the hand-id rule") from None
    entry = CodealEntry(kind, time_ms, hand_id)
    if kind == SETUP:
        if r.lp("version") != V.encode():
            raise CodealError("encoding", f"log entry: want version {V!r}")
        deck = r.lp("deck").decode("ascii", "replace")
        k = r.holders()
        entry = CodealEntry(
            kind, time_ms, hand_id, deck, tuple(r.take(KEY_RECORD_BYTES, "key record") for _ in range(k))
        )
    elif kind == SHUFFLE:
        entry = CodealEntry(kind, time_ms, hand_id, records=(r.lp("shuffle record"),))
    elif kind == SHARES:
        position = r.number(4, "position")
        k = r.holders()
        entry = CodealEntry(
            kind,
            time_ms,
            hand_id,
            records=tuple(r.take(SHARE_BYTES, "share") for _ in range(k)),
            position=position,
        )
    elif kind == SEEDS:
        k = r.holders()
        entry = CodealEntry(kind, time_ms, hand_id, records=tuple(r.lp("seed") for _ in range(k)))
    else:
        holder = r.number(4, "holder")
        if not 1 <= holder < MAX_HOLDERS:
            raise CodealError(
                "encoding", f"log entry: a co-dealer is holder 1 to {MAX_HOLDERS - 1}, not {holder}"
            )
        m = r.number(4, "m")
        if m * SEAL_BYTES != len(data) - r.at:
            raise CodealError(
                "encoding", f"log entry: {m} seals are {m * SEAL_BYTES} bytes, not {len(data) - r.at}"
            )
        seals = tuple(r.take(SEAL_BYTES, "seal") for _ in range(m))
        entry = CodealEntry(kind, time_ms, hand_id, records=seals, position=holder)
    if r.at != len(data):
        raise CodealError("encoding", "log entry: bytes after the last field")
    return entry
