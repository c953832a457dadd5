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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.models import HandState
from fairdeck.core.commitment import commit
from fairdeck.core.derivation import derive_deck, plan
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.log.logentry import CLOSED, VOIDED, CommitEntry, RevealEntry, deck_digest, decode
from fairdeck.log.note import Signer
from tests.log.testkit import (
    LONG_LIFETIME,
    BuiltLog,
    CliResult,
    append_signed,
    audit_data,
    database,
    finding_text,
    has_finding,
    read_checkpoints,
    read_entries,
    resign_all,
    sign_tree,
    signer_of,
    tree_root,
)
from tests.support.dealers import RunningDealer

Expected = tuple[str, int | None, str | None]
"""(problem text, index, hand id) of a finding the audit must report."""


@dataclass(frozen=True)
class Layout:
    """Where each hand's entries sit in the pristine log."""

    entries: list[bytes]
    commits: dict[str, int]
    reveals: dict[str, int]
    checkpoint_sizes: list[int]

    @classmethod
    def of(cls, built: BuiltLog) -> Layout:
        entries = read_entries(built.data_dir)
        commits: dict[str, int] = {}
        reveals: dict[str, int] = {}
        for i, data in enumerate(entries):
            e = decode(data)
            (commits if isinstance(e, CommitEntry) else reveals)[e.hand_id] = i
        return cls(entries, commits, reveals, built.checkpoint_sizes)

    def closed_hand(self, n: int, *, spaced: bool = False) -> str:
        """The n-th closed hand in log order (``spaced``: of those whose reveal is not
        right after their commit, i.e. the tables played side by side)."""
        hands = [
            h
            for h, i in sorted(self.commits.items(), key=lambda kv: kv[1])
            if h in self.reveals and (not spaced or self.reveals[h] > i + 1)
        ]
        return hands[n]

    def open_hand(self, n: int) -> str:
        return [h for h in sorted(self.commits, key=self.commits.__getitem__) if h not in self.reveals][n]

    def altered_range(self, first_changed: int) -> tuple[int, int]:
        """(the largest checkpoint size at or before ``first_changed``, or 0; the smallest after it)."""
        good = max([s for s in self.checkpoint_sizes if s <= first_changed], default=0)
        return good, min(s for s in self.checkpoint_sizes if s > first_changed)


@pytest.fixture(scope="module")
def layout(built_log: BuiltLog) -> Layout:
    return Layout.of(built_log)


def set_entry(data_dir: Path, index: int, data: bytes) -> None:
    with database(data_dir) as conn:
        assert conn.execute("UPDATE log_entries SET entry = ? WHERE idx = ?", (data, index)).rowcount == 1


def assert_fails_with(result: CliResult, expected: list[Expected]) -> None:
    assert result.rc == 1, result.out + result.err
    report = result.report
    assert report["ok"] is False
    for problem, index, hand_id in expected:
        assert has_finding(result, problem, index=index, hand_id=hand_id), (
            f"no finding {problem!r} at index {index}, hand {hand_id}; got:\n{finding_text(result)}"
        )


def assert_altered_once(
    result: CliResult, layout: Layout, first_changed: int, fails: Sequence[Expected] = ()
) -> None:
    """The change is the one finding: the entries between the last checkpoint that matches
    and the first that does not, naming the first of them that fails a check (from ``fails``)."""
    assert result.rc == 1, result.out + result.err
    good, bad = layout.altered_range(first_changed)
    assert len(result.findings) == 1, finding_text(result)
    [f] = result.findings
    assert (f["index"], f["last_index"], f["hand_id"]) == (good, None if bad - good == 1 else bad - 1, None)
    assert f"the signed checkpoint for tree size {bad} " in f["problem"]
    assert ("(no checkpoint matches)" if good == 0 else f"(the checkpoint for tree size {good} matches)") in (
        f["problem"]
    )
    in_range = sorted(
        (index, problem) for problem, index, _ in fails if index is not None and good <= index < bad
    )
    if in_range and bad - good == 1:
        assert f"; it also fails a check: {in_range[0][1]}" in f["problem"], f["problem"]
    elif in_range:
        assert f"; the first to fail a check is entry {in_range[0][0]}: {in_range[0][1]}" in f["problem"]
    else:
        assert "fail" not in f["problem"].split(" matches)")[1]


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


# -- rows deleted, swapped, truncated -----------------------------------------------------------------


@pytest.mark.parametrize("which", ["first", "a commit", "a reveal"])
def test_deleted_row(which: str, layout: Layout, built_log: BuiltLog, log_copy: Path) -> None:
    index = {
        "first": 0,
        "a commit": layout.commits[layout.closed_hand(33)],
        "a reveal": layout.reveals[layout.closed_hand(140)],
    }[which]
    with database(log_copy) as conn:
        conn.execute("DELETE FROM log_entries WHERE idx = ?", (index,))

    result = audit_data(log_copy)
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == [
        f"could not read the whole log: log entry {index} is missing (next stored index is {index + 1})",
        f"log truncated: a checkpoint signs {built_log.entries} entries, only {index} are present",
    ]


def _commit_and_its_reveal(lay: Layout) -> tuple[int, int, list[Expected]]:
    hand = lay.closed_hand(12)
    i, j = lay.commits[hand], lay.reveals[hand]
    return i, j, [("reveal without a prior commitment", i, hand)]  # the reveal now sits at i


def _two_commits(lay: Layout) -> tuple[int, int, list[Expected]]:
    # Two tables played side by side: both reveals come after both commits.
    return lay.commits[lay.closed_hand(10, spaced=True)], lay.commits[lay.closed_hand(17, spaced=True)], []


def _two_reveals(lay: Layout) -> tuple[int, int, list[Expected]]:
    a, b = lay.reveals[lay.closed_hand(4, spaced=True)], lay.reveals[lay.closed_hand(22, spaced=True)]
    return min(a, b), max(a, b), []


@pytest.mark.parametrize(
    "pick", [_commit_and_its_reveal, _two_commits, _two_reveals], ids=["commit-reveal", "commits", "reveals"]
)
def test_swapped_rows(
    pick: Callable[[Layout], tuple[int, int, list[Expected]]], layout: Layout, log_copy: Path
) -> None:
    i, j, expected = pick(layout)
    assert i < j
    set_entry(log_copy, i, layout.entries[j])
    set_entry(log_copy, j, layout.entries[i])

    assert_altered_once(audit_data(log_copy), layout, i, expected)


@pytest.mark.parametrize("cut", [1, 7, "to an older checkpoint"])
def test_truncated_log(cut: int | str, layout: Layout, built_log: BuiltLog, log_copy: Path) -> None:
    n = built_log.entries
    keep = built_log.checkpoint_sizes[-4] if isinstance(cut, str) else n - cut
    with database(log_copy) as conn:
        conn.execute("DELETE FROM log_entries WHERE idx >= ?", (keep,))

    result = audit_data(log_copy)
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == [  # once, for the largest signed size
        f"log truncated: a checkpoint signs {n} entries, only {keep} are present"
    ]


def test_rollback_with_its_checkpoints_is_caught_only_by_since(
    built_log: BuiltLog, log_copy: Path, tmp_path: Path
) -> None:
    """Truncating the entries AND the checkpoints above leaves a consistent older
    log: only a checkpoint saved by an earlier audit (--since) can tell."""
    since = tmp_path / "seen.checkpoint"
    since.write_bytes(read_checkpoints(built_log.data_dir)[-1][2])
    keep = built_log.checkpoint_sizes[-3]
    with database(log_copy) as conn:
        conn.execute("DELETE FROM log_entries WHERE idx >= ?", (keep,))
        conn.execute("DELETE FROM checkpoints WHERE size > ?", (keep,))

    assert audit_data(log_copy).rc == 0  # the limit: an older log is a valid log

    result = audit_data(log_copy, "--since", str(since))
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == [
        f"log truncated: a checkpoint signs {built_log.entries} entries, only {keep} are present "
        "(the checkpoint saved by the earlier audit)"
    ]
    assert result.report["consistency"] == (
        f"NOT consistent with the saved checkpoint (tree size {built_log.entries})"
    )
    assert since.read_bytes() == read_checkpoints(built_log.data_dir)[-1][2], "not updated on failure"


# -- a revealed seed replaced -------------------------------------------------------------------------


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


def test_invisible_rewrite_re_signed_is_caught_only_by_since(
    layout: Layout, built_log: BuiltLog, log_copy: Path, tmp_path: Path
) -> None:
    """A rewrite that leaves every hand consistent (a commit's timestamp), re-signed
    with the real key: the log alone is valid again; --since still catches it."""
    i = layout.commits[layout.closed_hand(90)]
    e = decode(layout.entries[i])
    assert isinstance(e, CommitEntry)
    set_entry(log_copy, i, CommitEntry(e.time_ms - 1, e.hand_id, e.version, e.deck, e.commitment).encode())
    resign_all(log_copy)
    assert audit_data(log_copy).rc == 0

    since = tmp_path / "seen.checkpoint"
    since.write_bytes(read_checkpoints(built_log.data_dir)[-2][2])  # an older head, still a prefix size
    result = audit_data(log_copy, "--since", str(since))
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == [
        f"signed checkpoint for tree size {built_log.checkpoint_sizes[-2]} does not match the entries "
        f"(the checkpoint for tree size {built_log.entries} signs them: two histories were signed)"
    ]


# -- checkpoints re-signed ------------------------------------------------------------------------------


@pytest.mark.parametrize("which", [0, 5, -1], ids=["first", "middle", "head"])
def test_second_root_signed_with_the_real_key(which: int, built_log: BuiltLog, log_copy: Path) -> None:
    """A different root at an existing size, properly signed: a fork the audit must see."""
    size = built_log.checkpoint_sizes[which]
    signer = signer_of(log_copy)
    forged_root = tree_root([*read_entries(log_copy)[: size - 1], b"another entry"])
    with database(log_copy) as conn:
        conn.execute(
            "UPDATE checkpoints SET root = ?, note = ? WHERE size = ?",
            (forged_root, sign_tree(signer, size, forged_root), size),
        )

    result = audit_data(log_copy)
    assert result.rc == 1
    [f] = result.findings
    if size < built_log.entries:  # a later checkpoint signs the entries: this root is the odd one out
        assert f["problem"] == (
            f"signed checkpoint for tree size {size} does not match the entries (the checkpoint for "
            f"tree size {built_log.entries} signs them: two histories were signed)"
        )
    else:  # the head: nothing later vouches for the entries, so they are what is in question
        assert f["index"] == built_log.checkpoint_sizes[-2]
        assert f"the signed checkpoint for tree size {size} " in f["problem"]


def test_checkpoint_signed_by_another_key(built_log: BuiltLog, log_copy: Path) -> None:
    size = built_log.checkpoint_sizes[3]
    impostor = Signer.generate(signer_of(log_copy).name)  # same origin, different key
    with database(log_copy) as conn:
        root = conn.execute("SELECT root FROM checkpoints WHERE size = ?", (size,)).fetchone()[0]
        conn.execute(
            "UPDATE checkpoints SET note = ? WHERE size = ?", (sign_tree(impostor, size, root), size)
        )

    result = audit_data(log_copy)
    assert result.rc == 1
    assert len(result.findings) == 1
    assert result.findings[0]["problem"].startswith("checkpoint does not verify under the log key")


def test_log_without_any_checkpoint(log_copy: Path) -> None:
    with database(log_copy) as conn:
        conn.execute("DELETE FROM checkpoints")
    result = audit_data(log_copy)
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == ["no signed checkpoint covers the log"]


# -- forged entries appended and signed with the real key -----------------------------------------------


def _hand(
    hand_id: str, seed_byte: int, deck: str = "standard"
) -> tuple[bytes, bytes, bytes, tuple[int, ...]]:
    """(seed, commit entry, a correct reveal entry, cards) of a hand the forger makes up."""
    seed = bytes([seed_byte]) * plan(CURRENT_VERSION, deck).seed_bytes
    seeds = (b"forged",)
    cards = derive_deck(deck, hand_id, seed, seeds, version=CURRENT_VERSION)
    now = time.time_ns() // 1_000_000
    c = CommitEntry(now, hand_id, CURRENT_VERSION, deck, commit(deck, hand_id, seed)).encode()
    r = RevealEntry(now, hand_id, CLOSED, seed, seeds, deck_digest(cards)).encode()
    return seed, c, r, cards


def _forged_reveal_without_commit(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    _, _, reveal, _ = _hand("never-committed", 1)
    return [reveal], [("reveal without a prior commitment", n, "never-committed")]


def _forged_duplicate_hand_id(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    hand = lay.closed_hand(30)  # re-commit a real hand id: a second deck for the same hand
    _, c, _, _ = _hand(hand, 2)
    return [c], [("hand id committed twice", n, hand)]


def _forged_wrong_deck_digest(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    seed, c, _, cards = _hand("forged-digest", 3)
    other = deck_digest(tuple(reversed(cards)))  # the seeds open the commitment; the deck is not theirs
    r = RevealEntry(0, "forged-digest", CLOSED, seed, (b"forged",), other).encode()
    return [c, r], [("the deck dealt is not the deck the seeds derive", n + 1, "forged-digest")]


def _forged_second_reveal(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    hand = lay.closed_hand(31)
    return [lay.entries[lay.reveals[hand]]], [("hand revealed twice", n, hand)]


def _forged_reveal_of_open_hand(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    hand = lay.open_hand(0)  # the operator does not know the sealed seed; it makes one up
    seed = bytes(plan(CURRENT_VERSION, "standard").seed_bytes)
    r = RevealEntry(0, hand, VOIDED, seed, (), deck_digest(())).encode()
    return [r], [("revealed server seed does not open the commitment", n, hand)]


def _forged_seed_of_wrong_length(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    seed = b"short seed"
    c = CommitEntry(
        0, "forged-length", CURRENT_VERSION, "standard", commit("standard", "forged-length", seed)
    )
    r = RevealEntry(0, "forged-length", CLOSED, seed, (), bytes(32))
    return [c.encode(), r.encode()], [("revealed values are not valid", n + 1, "forged-length")]


def _forged_garbage(lay: Layout, n: int) -> tuple[list[bytes], list[Expected]]:
    return [b"FDL1\x01 not an entry"], [("entry does not parse", n, None)]


FORGERIES = [
    _forged_reveal_without_commit,
    _forged_duplicate_hand_id,
    _forged_wrong_deck_digest,
    _forged_second_reveal,
    _forged_reveal_of_open_hand,
    _forged_seed_of_wrong_length,
    _forged_garbage,
]


@pytest.mark.parametrize("since", [False, True], ids=["alone", "with --since"])
@pytest.mark.parametrize("forge", FORGERIES, ids=lambda f: f.__name__.removeprefix("_forged_"))
def test_forged_append_signed_with_the_real_key(
    forge: Callable[[Layout, int], tuple[list[bytes], list[Expected]]],
    since: bool,
    layout: Layout,
    built_log: BuiltLog,
    log_copy: Path,
    tmp_path: Path,
) -> None:
    """Appended with a valid checkpoint signed by the real key over the forged tree,
    so the old log is a prefix and every root verifies: the content checks alone
    must name the forged entry."""
    new_entries, expected = forge(layout, built_log.entries)
    size = append_signed(log_copy, new_entries)
    extra: list[str] = []
    if since:
        saved = tmp_path / "seen.checkpoint"
        saved.write_bytes(read_checkpoints(built_log.data_dir)[-1][2])
        extra = ["--since", str(saved)]

    result = audit_data(log_copy, *extra)
    assert result.rc == 1
    assert result.report["tree_size"] == size, "the forged checkpoint verifies: it is the head"
    assert len(result.findings) == len(expected), finding_text(result)
    for found, (problem, index, hand_id) in zip(result.findings, expected, strict=True):
        assert found["problem"].startswith(problem) and (found["index"], found["hand_id"]) == (index, hand_id)


def test_well_formed_forged_hand_is_indistinguishable(
    built_log: BuiltLog, log_copy: Path, tmp_path: Path
) -> None:
    """The limit of any audit: a consistent hand appended by the key holder passes,
    and the old log is a prefix, so --since passes and moves forward too."""
    _, c, r, _ = _hand("forged-but-fair", 4)
    size = append_signed(log_copy, [c, r])
    saved = tmp_path / "seen.checkpoint"
    saved.write_bytes(read_checkpoints(built_log.data_dir)[-1][2])

    result = audit_data(log_copy, "--since", str(saved))
    assert result.rc == 0, finding_text(result)
    assert result.report["tree_size"] == size
    assert result.report["closed"] == len(built_log.closed) + 1
    assert saved.read_bytes() == read_checkpoints(log_copy)[-1][2]


# -- deck shopping ---------------------------------------------------------------------------------------


def test_open_hands_past_the_audit_lifetime_are_named(built_log: BuiltLog, layout: Layout) -> None:
    """The same log, audited with a lifetime shorter than the hands' age: every unrevealed
    commitment that the log holds a later entry for, more than the lifetime after it, is named,
    and only those; the others are pending (docs/log-format.md, "Overdue hands")."""
    lenient = audit_data(built_log.data_dir, "--max-hand-lifetime", LONG_LIFETIME)
    assert lenient.rc == 0
    assert lenient.report["open_within_lifetime"] == len(built_log.still_open)

    time.sleep(0.01)
    strict = audit_data(built_log.data_dir, "--max-hand-lifetime", "0.005")
    times = [decode(e).time_ms for e in layout.entries]
    overdue = {
        h
        for h in built_log.still_open
        if max(times[layout.commits[h] + 1 :], default=0) - times[layout.commits[h]] > 5
    }
    assert overdue, "the log holds entries dealt after its open hands"
    assert strict.rc == 1
    assert strict.report["open_within_lifetime"] == len(built_log.still_open) - len(overdue)
    assert {(f["hand_id"], f["index"]) for f in strict.findings} == {(h, layout.commits[h]) for h in overdue}
    assert all("never revealed within the maximum hand lifetime" in f["problem"] for f in strict.findings)


def test_stopped_dealer_leaves_unrevealed_commitments_then_voids_them(tmp_path: Path) -> None:
    """A dealer stopped before it can void its stale hands: downtime longer than the lifetime is
    not deck shopping (the log holds nothing after them: they are pending); started again with a
    short lifetime, it voids them, and the audit then passes and counts them as voided."""
    data = tmp_path / "data"
    with RunningDealer(data, max_hand_lifetime=3600) as dealer, DealerClient(dealer.target, timeout=20) as c:
        opened = {c.open_hand("standard").hand_id for _ in range(3)}
        opened |= {c.deal_new_hand("short").hand.hand_id for _ in range(2)}
        drawn = c.open_hand("jokers")
        c.draw(drawn.hand_id, 3)
        opened.add(drawn.hand_id)
        closed = c.open_hand("standard")
        c.close_hand(closed.hand_id)
    commits = {decode(e).hand_id: i for i, e in enumerate(read_entries(data)) if decode(e).hand_id in opened}

    time.sleep(0.6)
    pending = audit_data(data, "--max-hand-lifetime", "0.5")
    assert pending.rc == 0, finding_text(pending)
    assert pending.report["open_within_lifetime"] == len(opened)
    assert commits and pending.report["last_entry_index"] == len(read_entries(data)) - 1

    with RunningDealer(data, max_hand_lifetime=0.5) as dealer, DealerClient(dealer.target, timeout=20) as c:
        deadline = time.monotonic() + 10
        while any(c.get(h).state is not HandState.CLOSED for h in opened):
            assert time.monotonic() < deadline, "the dealer did not void its stale hands"
            time.sleep(0.05)
        for h in opened:
            c.get(h).verify()  # a voided hand is revealed like any other

    result = audit_data(data, "--max-hand-lifetime", "0.5")
    assert result.rc == 0, finding_text(result)
    assert result.report["voided"] == len(opened)
    assert result.report["closed"] == 1
    logged = [decode(e) for e in read_entries(data)]
    assert {e.hand_id for e in logged if isinstance(e, RevealEntry) and e.outcome == VOIDED} == opened


def test_running_dealer_voids_in_time(tmp_path: Path) -> None:
    """A dealer with a 1 s lifetime that keeps running: its stale hands are voided
    and logged, so an audit with the same lifetime passes."""
    data = tmp_path / "data"
    with RunningDealer(data, max_hand_lifetime=1.0) as dealer, DealerClient(dealer.target, timeout=20) as c:
        opened = [c.open_hand("standard").hand_id for _ in range(4)] + [c.deal_new_hand().hand.hand_id]
        deadline = time.monotonic() + 15
        while any(c.get(h).state is not HandState.CLOSED for h in opened):
            assert time.monotonic() < deadline, "the dealer did not void its stale hands"
            time.sleep(0.1)
    time.sleep(0.01)
    result = audit_data(data, "--max-hand-lifetime", "1")
    assert result.rc == 0, finding_text(result)
    assert result.report["voided"] == len(opened)
    assert result.report["open_within_lifetime"] == 0
    # The same log with the voids cut off (and re-signed with the real key) is pending: nothing
    # follows the open hands. With a hand dealt 2 s later in their place, it is deck shopping.
    entries = read_entries(data)
    with database(data) as conn:
        conn.execute("DELETE FROM log_entries WHERE idx >= ?", (len(opened),))
    resign_all(data)
    assert len(read_entries(data)) == len(opened) < len(entries)
    assert audit_data(data, "--max-hand-lifetime", "1").rc == 0
    later = CommitEntry(
        decode(entries[len(opened) - 1]).time_ms + 2000, "later", CURRENT_VERSION, "standard", bytes(32)
    )
    with database(data) as conn:
        conn.execute("INSERT INTO log_entries (idx, entry) VALUES (?, ?)", (len(opened), later.encode()))
    resign_all(data)
    shopping = audit_data(data, "--max-hand-lifetime", "1")
    assert shopping.rc == 1
    assert {f["hand_id"] for f in shopping.findings} == set(opened)
