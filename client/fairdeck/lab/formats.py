"""The files a collection holds, and the formats the batteries read. Pure.

Binary files are plain byte streams, read in file order:

* dieharder reads them with ``-g 201`` (``file_input_raw``: 32-bit words, in the machine's byte
  order); PractRand with ``RNG_test stdin`` (``cat FILE | RNG_test stdin``); TestU01 with
  ``ufile_CreateReadBin(FILE, ...)``. None of them needs a header.
* NIST SP 800-22's assessment tool (``assess``) reads the ASCII file: one character ``0`` or
  ``1`` per bit, most significant bit of each byte first (its input format 0, "ASCII").

The scaled and final files have fixed-width records, so record ``k`` of any file is hand ``k``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

RAW = "raw/stream.bin"
RAW_NIST = "raw/stream.nist.txt"
SEEDS = "seeds/server-seeds.bin"
SEEDS_NIST = "seeds/server-seeds.nist.txt"
INDEX = "scaled/index.bin"
CHOICES = "scaled/choices.bin"
ATTEMPTS = "scaled/attempts.bin"
DECKS = "final/decks.bin"
TRANSCRIPTS = "final/transcripts.jsonl"

APPENDED = (RAW, SEEDS, INDEX, CHOICES, ATTEMPTS, DECKS, TRANSCRIPTS)
"""The files every batch appends to, in the order they are written."""

BOUND = (*APPENDED, RAW_NIST, SEEDS_NIST)
"""Every file of a collection, each bound by the manifest (size and SHA-256)."""

NIST_BITS = 100 * 1_000_000
"""Bits of each ASCII file: SP 800-22's 100 sequences of 10^6 bits."""


@dataclass(frozen=True)
class Layout:
    """Record sizes of a deck's scaled and final files."""

    cards: int
    index_bytes: int
    """``ceil(B / 8)``: the index as that many big-endian bytes."""

    @property
    def card_bytes(self) -> int:
        """1 for decks of up to 256 cards, else 2 (big-endian)."""
        return 1 if self.cards <= 256 else 2

    def card(self, value: int) -> bytes:
        return value.to_bytes(self.card_bytes, "big")

    def cards_of(self, values: Sequence[int]) -> bytes:
        """``values`` (card ids, or choices) as records of ``card`` each, in one call."""
        if self.card_bytes == 1:
            return bytes(values)  # each below 256, as card() would check
        return b"".join(self.card(v) for v in values)


def record_sizes(layout: Layout, seed_bytes: int, hands: int) -> dict[str, int]:
    """The size of each fixed-record file for ``hands`` hands of this layout."""
    return {
        SEEDS: seed_bytes * hands,
        INDEX: layout.index_bytes * hands,
        CHOICES: (layout.cards - 1) * layout.card_bytes * hands,
        ATTEMPTS: hands,
        DECKS: layout.cards * layout.card_bytes * hands,
    }


def describe(layout: Layout) -> dict[str, str]:
    """What each file holds, for the manifest."""
    width = "one byte" if layout.card_bytes == 1 else "two bytes, big-endian,"
    return {
        RAW: "raw RNG output: every 64-byte SHAKE-256 block the derivation computed, whole, hand after "
        "hand (before rejection and scaling; dieharder -g 201, PractRand stdin, TestU01 ReadBin)",
        RAW_NIST: "the first bits of raw/stream.bin as ASCII 0/1, most significant bit first (NIST assess)",
        SEEDS: "the seed source: each hand's server seed as the dealer drew it from the OS CSPRNG, "
        "hand after hand",
        SEEDS_NIST: "the first bits of seeds/server-seeds.bin as ASCII 0/1 (NIST assess)",
        INDEX: f"scaled: each hand's uniform index below n!, {layout.index_bytes} bytes big-endian",
        CHOICES: f"scaled: each hand's {layout.cards - 1} Durstenfeld choices j (i = n-1 down to 1), "
        f"{width} each",
        ATTEMPTS: "scaled: each hand's number of rejection attempts, one byte",
        DECKS: f"final outcomes: each dealt deck's {layout.cards} card ids, top first, {width} each",
        TRANSCRIPTS: "final outcomes: one transcript (docs/fairness-spec.md section 7) per line, with "
        "its log indexes when dealt live",
    }


def bits_of(chunk: bytes) -> bytes:
    """``chunk``'s bits as ASCII 0/1, most significant bit of each byte first."""
    if not chunk:
        return b""
    # The chunk as one big-endian number written in base 2, zeros in front kept: no loop per byte.
    return format(int.from_bytes(chunk, "big"), f"0{8 * len(chunk)}b").encode()


def ascii_bits(src: BinaryIO, out: BinaryIO, bits: int) -> int:
    """Write the first ``bits`` bits (whole bytes) of ``src`` as ASCII 0/1; returns bits written."""
    written = 0
    while written < bits:
        chunk = src.read(min(1 << 20, (bits - written + 7) // 8))
        if not chunk:
            break
        out.write(bits_of(chunk))
        written += 8 * len(chunk)
    return written
