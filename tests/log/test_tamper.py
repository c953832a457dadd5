"""Tampering with a real log at rest: ``fairdeck audit --data`` must fail and
say what it found.

A real dealer writes a few hundred hands (closed by CloseHand, by
DealHands(close=True), a few left open) and stops; the pristine audit passes.
Each test then tampers with a COPY of the data dir, as an operator with
database access (and, where said, the real signing key) could, and checks
the audit's findings name the right entry, hand or kind of problem.

What the auditor can and cannot know is part of the contract:

- Without the key, any change to a checkpointed entry breaks the signed
  roots from the first checkpoint covering it on. The audit reports that
  once, at the first entry that may be altered: between the largest
  checkpoint that still matches and the smallest that does not (and names
  the first entry there that fails a check); what follows from it is counted,
  not listed. The tests check exactly which range is named, so each test
  breaks if the root check goes.
- With the real key, a rewritten history can be re-signed. It is then caught
  only by the content checks (a reveal must follow its commitment, open it and
  match the deck digest; hand ids are unique) or by ``--since`` with a
  checkpoint saved before the rewrite. A well-formed forged hand appended
  with the real key is indistinguishable from a real one; that test documents
  the limit rather than pretending otherwise.

The rows deleted, swapped and truncated are in test_tamper_rows.py; what the key holder can
re-sign is in test_tamper_resigned.py; shared parts in tests/support/tampering.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairdeck.log.logentry import CLOSED, VOIDED, RevealEntry, decode
from tests.support.logs import BuiltLog, audit_data, read_checkpoints, resign_all, tree_root
from tests.support.tampering import Expected, Layout, assert_altered_once, assert_fails_with, set_entry


def test_the_untouched_log_passes(built_log: BuiltLog, layout: Layout) -> None:
    result = audit_data(built_log.data_dir)
    assert result.rc == 0, result.out + result.err
    report = result.report
    assert report["ok"] is True and report["findings"] == []
    assert report["entries"] == report["tree_size"] == built_log.entries
    assert report["hands"] == len(built_log.closed) + len(built_log.still_open)
    assert report["closed"] == len(built_log.closed)
    assert report["open_within_lifetime"] == len(built_log.still_open)
    assert bytes.fromhex(report["root"]) == tree_root(layout.entries)


# -- one changed byte --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ByteChange:
    """Where to change one byte, and what the audit must then say besides the broken roots."""

    index: int
    offset: int
    new_byte: int
    expected: list[Expected]


def _reveal_offsets(data: bytes) -> dict[str, int]:
    e = decode(data)
    assert isinstance(e, RevealEntry)
    outcome = 17 + len(e.hand_id)
    seed = outcome + 1 + 4
    first_client_seed = seed + len(e.server_seed) + 4 + 4
    return {"outcome": outcome, "seed": seed, "client_seed": first_client_seed, "digest": len(data) - 32}


def _flip(data: bytes, offset: int) -> int:
    return data[offset] ^ 0x01


def commitment_byte(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(3)
    i = lay.commits[hand]
    at = len(lay.entries[i]) - 20  # inside lp(commitment), the last field
    return ByteChange(
        i, at, _flip(lay.entries[i], at),
        [("revealed server seed does not open the commitment", lay.reveals[hand], hand)],
    )  # fmt: skip


def revealed_seed_byte(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(40)
    i = lay.reveals[hand]
    at = _reveal_offsets(lay.entries[i])["seed"] + 7
    return ByteChange(
        i, at, _flip(lay.entries[i], at), [("revealed server seed does not open the commitment", i, hand)]
    )


def client_seed_byte(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(5)  # opened, shuffled with client seeds, drawn, closed
    i = lay.reveals[hand]
    at = _reveal_offsets(lay.entries[i])["client_seed"]
    return ByteChange(
        i, at, _flip(lay.entries[i], at), [("the deck dealt is not the deck the seeds derive", i, hand)]
    )


def deck_digest_byte(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(-2)
    i = lay.reveals[hand]
    at = _reveal_offsets(lay.entries[i])["digest"] + 31
    return ByteChange(
        i, at, _flip(lay.entries[i], at), [("the deck dealt is not the deck the seeds derive", i, hand)]
    )


def hand_id_in_commit(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(60)
    i = lay.commits[hand]
    at = 17 + 4  # the fifth character of the hand id
    new = ord("0") if hand[4] != "0" else ord("1")  # still a valid hand id
    return ByteChange(i, at, new, [("reveal without a prior commitment", lay.reveals[hand], hand)])


def hand_id_in_reveal(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(61)
    i = lay.reveals[hand]
    new_char = "0" if hand[0] != "0" else "1"
    return ByteChange(i, 17, ord(new_char), [("reveal without a prior commitment", i, new_char + hand[1:])])


def hand_id_not_ascii(lay: Layout) -> ByteChange:
    hand = lay.open_hand(2)
    i = lay.commits[hand]
    return ByteChange(i, 18, 0xFF, [("entry does not parse: log entry text field is not ASCII", i, None)])


def magic_of_commit(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(0)
    i = lay.commits[hand]
    return ByteChange(
        i, 0, ord("X"),
        [
            ("entry does not parse: log entry has an unknown format (magic)", i, None),
            ("reveal without a prior commitment", lay.reveals[hand], hand),
        ],
    )  # fmt: skip


def magic_of_reveal(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(100)
    i = lay.reveals[hand]
    return ByteChange(
        i, 3, ord("2"), [("entry does not parse: log entry has an unknown format (magic)", i, None)]
    )


def entry_type(lay: Layout) -> ByteChange:
    i = lay.commits[lay.closed_hand(7)]
    return ByteChange(i, 4, 9, [("entry does not parse: log entry has unknown type 9", i, None)])


def length_prefix(lay: Layout) -> ByteChange:
    i = lay.commits[lay.closed_hand(8)]
    return ByteChange(i, 16, 0xFF, [("entry does not parse: log entry is truncated", i, None)])


def unknown_outcome(lay: Layout) -> ByteChange:
    hand = lay.closed_hand(9)
    i = lay.reveals[hand]
    return ByteChange(
        i, _reveal_offsets(lay.entries[i])["outcome"], 7,
        [("entry does not parse: reveal entry has unknown outcome 7", i, None)],
    )  # fmt: skip


BYTE_CHANGES = [
    commitment_byte,
    revealed_seed_byte,
    client_seed_byte,
    deck_digest_byte,
    hand_id_in_commit,
    hand_id_in_reveal,
    hand_id_not_ascii,
    magic_of_commit,
    magic_of_reveal,
    entry_type,
    length_prefix,
    unknown_outcome,
]


@pytest.mark.parametrize("change", BYTE_CHANGES, ids=lambda f: f.__name__)
def test_one_changed_byte(change: Callable[[Layout], ByteChange], layout: Layout, log_copy: Path) -> None:
    c = change(layout)
    data = bytearray(layout.entries[c.index])
    assert data[c.offset] != c.new_byte
    data[c.offset] = c.new_byte
    set_entry(log_copy, c.index, bytes(data))

    result = audit_data(log_copy)
    assert_altered_once(result, layout, c.index, c.expected)


def _time_low_byte(lay: Layout) -> tuple[int, int, int]:
    i = lay.commits[lay.closed_hand(20)]
    return i, 12, lay.entries[i][12] ^ 0x01


def _closed_as_voided(lay: Layout) -> tuple[int, int, int]:
    i = lay.reveals[lay.closed_hand(21)]
    at = _reveal_offsets(lay.entries[i])["outcome"]
    assert lay.entries[i][at] == CLOSED
    return i, at, VOIDED


@pytest.mark.parametrize("change", [_time_low_byte, _closed_as_voided], ids=["commit time", "outcome"])
def test_a_change_only_the_signed_root_catches(
    change: Callable[[Layout], tuple[int, int, int]], layout: Layout, log_copy: Path
) -> None:
    """A byte whose new value is still a consistent hand: the signed roots alone catch it."""
    index, offset, new = change(layout)
    data = bytearray(layout.entries[index])
    data[offset] = new
    set_entry(log_copy, index, bytes(data))

    assert_altered_once(audit_data(log_copy), layout, index)


def _replace_seed(layout: Layout, data_dir: Path, n: int) -> tuple[int, str]:
    hand = layout.closed_hand(n)
    i = layout.reveals[hand]
    e = decode(layout.entries[i])
    assert isinstance(e, RevealEntry)
    other = bytes(reversed(e.server_seed))  # a seed of the right length, not the committed one
    forged = RevealEntry(e.time_ms, e.hand_id, e.outcome, other, e.client_seeds, e.deck_digest)
    set_entry(data_dir, i, forged.encode())
    return i, hand


def test_replaced_seed_recomputing_nothing(layout: Layout, log_copy: Path) -> None:
    i, hand = _replace_seed(layout, log_copy, 77)
    assert_altered_once(
        audit_data(log_copy), layout, i, [("revealed server seed does not open the commitment", i, hand)]
    )


def test_replaced_seed_re_signed_with_the_real_key(
    layout: Layout, built_log: BuiltLog, log_copy: Path, tmp_path: Path
) -> None:
    """The operator rewrites a reveal and re-signs the whole log with the real key:
    every root verifies, the commitment still does not open, and an earlier
    audit's checkpoint no longer is a prefix."""
    i, hand = _replace_seed(layout, log_copy, 78)
    resign_all(log_copy)

    result = audit_data(log_copy)
    assert result.rc == 1
    assert [(f["problem"], f["index"], f["hand_id"]) for f in result.findings] == [
        ("revealed server seed does not open the commitment", i, hand)
    ]

    since = tmp_path / "seen.checkpoint"
    since.write_bytes(read_checkpoints(built_log.data_dir)[-1][2])
    with_since = audit_data(log_copy, "--since", str(since))
    assert_fails_with(
        with_since,
        [
            (
                f"signed checkpoint for tree size {built_log.entries} does not match the entries (the "
                f"checkpoint for tree size {built_log.entries} signs them: two histories were signed)",
                None,
                None,
            )
        ],
    )
