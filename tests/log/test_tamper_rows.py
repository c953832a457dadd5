"""Tampering with the rows of a real log at rest: one deleted, two swapped, the log
truncated, and rolled back with its checkpoints; ``fairdeck audit --data`` must fail and say
what it found, and a rollback with its checkpoints is caught only by ``--since``. What the
auditor can know is in test_tamper.py's docstring; shared parts in tests/support/tampering.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.logs import BuiltLog, audit_data, database, read_checkpoints
from tests.support.tampering import Expected, Layout, assert_altered_once, set_entry

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
