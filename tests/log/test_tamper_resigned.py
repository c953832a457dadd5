"""What the holder of the real signing key can do to a log at rest, and what the audit
still catches: a rewrite re-signed (caught only by ``--since``), checkpoints re-signed,
replaced by another key's or removed, and forged entries appended under a valid checkpoint
(caught by the content checks alone, except a well-formed hand, which is the limit of any
audit). What the auditor can know is in test_tamper.py's docstring; shared parts in
tests/support/tampering.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.core.commitment import commit
from fairdeck.core.derivation import derive_deck, plan
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.log.logentry import CLOSED, VOIDED, CommitEntry, RevealEntry, deck_digest, decode
from fairdeck.log.note import Signer
from tests.support.logs import (
    BuiltLog,
    append_signed,
    audit_data,
    database,
    finding_text,
    read_checkpoints,
    read_entries,
    resign_all,
    sign_tree,
    signer_of,
    tree_root,
)
from tests.support.tampering import Expected, Layout, set_entry


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
