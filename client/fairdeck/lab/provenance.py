"""Where a collection's bytes come from: each layer re-derived from the one below it, and the hands
bound to the dealer's signed log. What ``fairdeck lab test`` runs before any battery.

A manifest is an unkeyed hash: anyone who replaces files can recompute it. So, for every hand (or
a sample the lab draws after it has the data), the transcript's seed must be its record of
``seeds/``, open its commitment, and derive (spec 3 to 5) exactly its blocks of ``raw/``, its
records of ``scaled/`` and its deck in ``final/``; the ASCII files are re-derived whole from
their binaries, the raw stream's length from ``attempts.bin``. A live collection holds its
dealer's log as tiles (``log/``) and the signed checkpoint: every tile is checked up to that
root, the note under the dealer's key, and each checked hand's commit and reveal entries against
its transcript. Without them (offline, or an older fairdeck) the collection is NOT BOUND: its
bytes are consistent, but anyone could have made them. Files are read through the descriptors
``lab test`` pinned when it hashed them.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import BLOCK_BYTES
from fairdeck.core.errors import VerificationError
from fairdeck.core.seeds import server_seed_length
from fairdeck.core.shuffle import shuffler
from fairdeck.core.strictjson import MAX_TEXT_BYTES, StrictJSONError, bounded_loads
from fairdeck.core.transcript import Transcript
from fairdeck.lab import formats
from fairdeck.lab.collection import transcript_from, verify_dealt
from fairdeck.log.checkpoint import CheckpointError, open_checkpoint
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import check_commit_entry, check_reveal_entry
from fairdeck.log.tiles import TileError, TileLog

LOG_DIR = "log"
"""A live collection's copy of its dealer's log, as C2SP tiles up to the signed checkpoint."""
MAX_TILE_BYTES = 256 * (2 + (1 << 16))
"""A bundle of 256 entries, each at most 64 KiB; a hash tile is 8 KiB."""
MAX_PROBLEMS = 10
BOUND, NOT_BOUND, FAILED = "BOUND", "NOT BOUND", "FAILED"

LAYERS = (
    "seeds/server-seeds.bin (each record is its transcript's server seed, which opens its commitment)",
    "raw/stream.bin (SHAKE-256 blocks from the seed, hand id and client seeds; its length from attempts.bin)",
    "scaled/attempts.bin, scaled/index.bin, scaled/choices.bin (rejection and Durstenfeld from the blocks)",
    "final/decks.bin (the cards of the choices, which are the transcript's cards)",
)


@dataclass
class Provenance:
    """What was re-derived, what was only hashed, and the binding; ``verdict`` is one of
    BOUND, NOT BOUND, FAILED."""

    hands: int
    checked: list[int] = field(default_factory=list)
    sample_seed: str | None = None
    binding: str = ""
    problems: list[str] = field(default_factory=list)
    bound: bool = False
    logs: dict[int, Any] = field(default_factory=dict, repr=False)
    """Each checked hand's transcript and log indexes (a live collection's)."""

    @property
    def verdict(self) -> str:
        return FAILED if self.problems else BOUND if self.bound else NOT_BOUND

    def summary(self) -> str:
        who = (
            f"all {self.hands:,} hands"
            if len(self.checked) == self.hands
            else f"{len(self.checked):,} of {self.hands:,} hands drawn after the data came "
            f"(seed {self.sample_seed})"
        )
        if self.problems:
            return f"{FAILED}: {self.problems[0]}"
        return f"{self.verdict}: every layer re-derived from the one below it for {who}; {self.binding}"

    def as_dict(self) -> dict[str, Any]:
        rest = len(self.checked) != self.hands
        return {
            "verdict": self.verdict,
            "binding": self.binding,
            "re-derived": {
                "hands": len(self.checked),
                "of": self.hands,
                "sample seed": self.sample_seed,
                "layers": list(LAYERS),
                "also": "raw/stream.nist.txt and seeds/server-seeds.nist.txt, whole, from their binaries",
            },
            "only hashed (manifest SHA-256, which anyone can recompute)": (
                "the records of the hands not drawn" if rest else "nothing"
            ),
            "problems": self.problems,
        }


class _Reader:
    """Records of pinned files, by byte range (``os.pread``)."""

    def __init__(self, pinned: dict[str, int]) -> None:
        self.pinned = pinned

    def read(self, name: str, offset: int, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = os.pread(self.pinned[name], size - len(data), offset + len(data))
            if not chunk:
                break
            data += chunk
        return data

    def size(self, name: str) -> int:
        return os.fstat(self.pinned[name]).st_size


def _line_starts(r: _Reader, hands: int) -> list[int]:
    """Where each transcript line starts; VerificationError unless there is one line per hand,
    none longer than a strict JSON text may be."""
    starts, offset, size = [0], 0, r.size(formats.TRANSCRIPTS)
    while offset < size:
        chunk = r.read(formats.TRANSCRIPTS, offset, 1 << 20)
        at = chunk.find(b"\n")
        while at >= 0:
            starts.append(offset + at + 1)
            at = chunk.find(b"\n", at + 1)
        offset += len(chunk)
        if offset - starts[-1] > MAX_TEXT_BYTES:
            raise VerificationError(
                "transcripts", f"{formats.TRANSCRIPTS} holds a line over {MAX_TEXT_BYTES:,} bytes"
            )
    if len(starts) != hands + 1 or starts[-1] != size:
        raise VerificationError(
            "transcripts", f"{formats.TRANSCRIPTS} does not hold one line per hand ({hands:,})"
        )
    return starts


def check(
    pinned: dict[str, int],
    manifest: dict[str, Any],
    *,
    sample: int | None,
    sample_seed: str,
    key: Verifier | None,
    fetch_tile: Any,
) -> Provenance:
    """Re-derive the collection (module docstring); ``fetch_tile(rel)`` reads ``log/rel``."""
    hands = manifest["hands"]
    result = Provenance(hands)
    r = _Reader(pinned)
    try:
        _rederive(r, manifest, result, sample, sample_seed)
        _ascii(r)
        if not result.problems:
            _bind(manifest, result, key, fetch_tile)
    except VerificationError as e:
        result.problems.append(e.detail)
    return result


def _rederive(
    r: _Reader, manifest: dict[str, Any], result: Provenance, sample: int | None, seed: str
) -> None:
    deck, hands = manifest["deck"], manifest["hands"]
    spec = DeckSpec.parse(deck)
    width = shuffler(spec.size).width
    layout = formats.Layout(spec.size, width)
    seed_bytes = server_seed_length(spec)
    attempts = r.read(formats.ATTEMPTS, 0, hands)
    blocks = [-(-a * width // BLOCK_BYTES) for a in attempts]
    if sum(blocks) * BLOCK_BYTES != r.size(formats.RAW) or 0 in attempts:
        raise VerificationError(
            "raw", f"{formats.RAW} does not hold the blocks that {formats.ATTEMPTS} counts for each hand"
        )
    starts = _line_starts(r, hands)
    chosen = list(range(hands))
    if sample is not None and sample < hands:
        chosen = sorted(random.Random(seed).sample(range(hands), sample))
        result.sample_seed = seed
    result.checked = chosen
    at, raw_offset = 0, 0
    card_bytes, choice_bytes = layout.card_bytes, (spec.size - 1) * layout.card_bytes
    for k in chosen:
        while at < k:
            raw_offset += blocks[at] * BLOCK_BYTES
            at += 1
        line = r.read(formats.TRANSCRIPTS, starts[k], starts[k + 1] - starts[k])
        try:
            value = bounded_loads(line, what=f"{formats.TRANSCRIPTS} line {k + 1}")
            t = transcript_from(value["transcript"])
            log = value.get("log")
        except (StrictJSONError, TypeError, KeyError, AttributeError) as e:
            raise VerificationError(
                "transcripts", f"{formats.TRANSCRIPTS} line {k + 1} is not a transcript ({e})"
            ) from None
        name = f"hand {k} ({t.hand_id})"
        if t.deck != deck or t.version != manifest.get("algorithm"):
            raise VerificationError(
                "transcripts", f"{name} is not a {deck} hand of {manifest.get('algorithm')}"
            )
        if r.read(formats.SEEDS, k * seed_bytes, seed_bytes) != t.server_seed:
            raise VerificationError(
                "seeds", f"{name}: its record of {formats.SEEDS} is not its transcript's seed"
            )
        traced = verify_dealt(t)  # the seed opens the commitment and derives the cards
        expected = {
            formats.RAW: (raw_offset, traced.blocks),
            formats.ATTEMPTS: (k, bytes([min(traced.attempts, 255)])),
            formats.INDEX: (k * width, traced.index.to_bytes(width, "big")),
            formats.CHOICES: (k * choice_bytes, layout.cards_of(traced.choices)),
            formats.DECKS: (k * spec.size * card_bytes, layout.cards_of(traced.cards)),
        }
        for file, (offset, data) in expected.items():
            if r.read(file, offset, len(data)) != data:
                raise VerificationError(
                    "layers", f"{name}: its records of {file} do not follow from its seed"
                )
        if isinstance(log, dict):
            result.logs[k] = (t, log)


def _ascii(r: _Reader) -> None:
    for binary, text in ((formats.RAW, formats.RAW_NIST), (formats.SEEDS, formats.SEEDS_NIST)):
        size = r.size(text)
        if size % 8 or size > 8 * r.size(binary):
            raise VerificationError("ascii", f"{text} is not the first bits of {binary}")
        for offset in range(0, size // 8, 1 << 20):
            chunk = r.read(binary, offset, min(1 << 20, size // 8 - offset))
            if r.read(text, 8 * offset, 8 * len(chunk)) != formats.bits_of(chunk):
                raise VerificationError("ascii", f"{text} is not the first bits of {binary}")


def _bind(manifest: dict[str, Any], result: Provenance, key: Verifier | None, fetch_tile: Any) -> None:
    logs = result.logs
    check_ = manifest.get("log_check")
    if not isinstance(check_, dict) or not isinstance(check_.get("checkpoint"), str):
        result.binding = (
            "NOT BOUND to any dealer's signed log (collected offline, without --target): the bytes are "
            "consistent with each other, but anyone could have made them"
        )
        return
    named = manifest.get("dealer_key")
    try:
        verifier = key or Verifier.parse(str(named))
        checkpoint = open_checkpoint(check_["checkpoint"].encode(), verifier, verifier.name)
    except (ValueError, CheckpointError) as e:
        raise VerificationError(
            "binding", f"the manifest's signed checkpoint does not verify ({e})"
        ) from None
    whose = (
        "the key given with --key" if key else "the key the manifest names (give --key to pin the operator's)"
    )
    try:
        log = TileLog(fetch_tile, checkpoint.size)
        wanted = {}
        for t, where in logs.values():
            wanted[int(where["commit"])] = (False, t)
            wanted[int(where["reveal"])] = (True, t)
        if len(wanted) != 2 * len(result.checked) or max(wanted, default=-1) >= checkpoint.size:
            raise VerificationError(
                "binding", "a checked hand's log entries are not under the signed checkpoint"
            )
        for index, (entry, _) in enumerate(log.entries_with_leaves()):
            if index in wanted:
                is_reveal, t = wanted[index]
                (check_reveal_entry if is_reveal else check_commit_entry)(entry, TranscriptView(t))
        if log.root() != checkpoint.root:
            raise VerificationError(
                "binding", f"the tiles in {LOG_DIR}/ do not give the signed checkpoint's root"
            )
    except FileNotFoundError:
        result.binding = (
            f"NOT BOUND: the manifest names a signed checkpoint, but the collection holds no {LOG_DIR}/ "
            "tiles to check the hands under it (collected by an older fairdeck)"
        )
        return
    except (TileError, OSError, KeyError, TypeError, ValueError) as e:
        raise VerificationError("binding", f"the collection's log ({LOG_DIR}/) does not check: {e}") from None
    result.bound = True
    result.binding = (
        f"bound: each checked hand's commit and reveal are in the dealer's log under its checkpoint of "
        f"tree size {checkpoint.size:,}, signed by {verifier.name}+{verifier.key_id:08x} ({whose})"
    )


@dataclass(frozen=True)
class TranscriptView:
    """What ``check_commit_entry`` and ``check_reveal_entry`` read of a hand, from its transcript
    (the collection's record of it, here and in live collection)."""

    transcript: Transcript

    @property
    def hand_id(self) -> str:
        return self.transcript.hand_id

    @property
    def deck(self) -> str:
        return self.transcript.deck

    @property
    def version(self) -> str:
        return self.transcript.version

    @property
    def commitment(self) -> bytes:
        return self.transcript.commitment
