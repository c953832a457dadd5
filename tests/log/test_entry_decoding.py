"""``logentry.decode`` (one pass over offsets, for the auditor's speed) decides every input as the
field-by-field reader it replaced did: the same entry, or the same error, on real entries and on
every truncation and hypothesis' mutations of them. The old reader is kept here as the reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.core.decks import SPEC_NAMES
from fairdeck.core.errors import InvalidInput
from fairdeck.core.versions import check_version
from fairdeck.log.logentry import (
    CLOSED,
    COMMIT,
    MAGIC,
    MAX_CLIENT_SEED_BYTES,
    MAX_CLIENT_SEEDS,
    REVEAL,
    VOIDED,
    CommitEntry,
    EntryError,
    RevealEntry,
    _digest,
    _hand_id,
    decode,
)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

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
        try:
            return self.field().decode("ascii")
        except UnicodeDecodeError:
            raise EntryError("log entry text field is not ASCII") from None


def reference(data: bytes) -> CommitEntry | RevealEntry:
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise EntryError("log entry has an unknown format (magic)")
    kind = r.int(1)
    entry: CommitEntry | RevealEntry
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
        if any(not 1 <= len(s) <= MAX_CLIENT_SEED_BYTES for s in seeds):
            raise EntryError(f"reveal entry has a client seed outside 1..{MAX_CLIENT_SEED_BYTES} bytes")
        entry = RevealEntry(time_ms, hand_id, outcome, seed, seeds, _digest(r.field(), "deck digest"))
    else:
        raise EntryError(f"log entry has unknown type {kind}")
    if r.pos != len(data):
        raise EntryError("log entry has trailing bytes")
    return entry


def verdict(fn: object, data: bytes) -> object:
    try:
        return fn(data)  # type: ignore[operator]
    except EntryError as e:
        return ("error", str(e))


COMMIT_ENTRY = CommitEntry(1_700_000_000_000, "hand-1", "fairdeck-v1", "standard", bytes(range(32))).encode()
REVEAL_ENTRY = RevealEntry(1_700_000_000_001, "hand-1", CLOSED, bytes(34), (b"a", b"bc"), bytes(32)).encode()


@pytest.mark.parametrize("entry", [COMMIT_ENTRY, REVEAL_ENTRY], ids=["commit", "reveal"])
def test_every_truncation_and_byte_is_decided_the_same(entry: bytes) -> None:
    for n in range(len(entry) + 1):
        assert verdict(decode, entry[:n]) == verdict(reference, entry[:n]), n
    assert verdict(decode, entry + b"\x00") == verdict(reference, entry + b"\x00")
    for i in range(len(entry)):
        for value in (0, 1, 2, 0x7F, 0xFF):
            changed = entry[:i] + bytes([value]) + entry[i + 1 :]
            assert verdict(decode, changed) == verdict(reference, changed), (i, value)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([COMMIT_ENTRY, REVEAL_ENTRY]),
    st.lists(st.tuples(st.integers(0, 200), st.binary(max_size=6)), max_size=4),
)
def test_mutations_are_decided_the_same(entry: bytes, edits: list[tuple[int, bytes]]) -> None:
    data = bytearray(entry)
    for at, chunk in edits:
        at = min(at, len(data))
        data[at : at + len(chunk)] = chunk
    assert verdict(decode, bytes(data)) == verdict(reference, bytes(data))
