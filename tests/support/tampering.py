"""Shared parts of the tampering tests (test_tamper*.py, test_deck_shopping.py): where each
hand's entries sit in the pristine built log (``Layout``, and the ``layout`` fixture that
conftest.py provides), writing an entry of a copied data dir, and what the audit must then
report: one finding for a change under the signed roots (``assert_altered_once``), or the
findings named (``assert_fails_with``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fairdeck.log.logentry import CommitEntry, decode
from tests.support.logs import BuiltLog, CliResult, database, finding_text, has_finding, read_entries

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
