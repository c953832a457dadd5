"""The overdue rule of docs/log-format.md ("Overdue hands"), from its vectors
(docs/vectors/fairdeck-audit-v1.json): each log through the auditor gives exactly the overdue
and pending hands the vector names, and the vectors are what generate_audit.py makes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.log.audit import Auditor
from fairdeck.log.logentry import CommitEntry, decode
from fairdeck.log.note import Verifier

ROOT = Path(__file__).resolve().parents[2]
VECTORS: dict[str, Any] = json.loads((ROOT / "docs" / "vectors" / "fairdeck-audit-v1.json").read_text())
VERIFIER = Verifier.parse(VECTORS["key"]["verifier_key"])


@pytest.mark.parametrize("case", VECTORS["overdue"], ids=lambda c: c["name"])
def test_overdue_vectors(case: dict[str, Any]) -> None:
    auditor = Auditor(
        VERIFIER, max_hand_lifetime_ms=case["max_hand_lifetime_ms"], checkpoints=[case["checkpoint"].encode()]
    )
    entries = [bytes.fromhex(e["entry"]) for e in case["entries"]]
    for entry in entries:
        auditor.add(entry)
    report = auditor.finish()
    expected = case["expected"]
    commits = {e.hand_id: i for i, e in enumerate(map(decode, entries)) if isinstance(e, CommitEntry)}
    assert {(f.hand_id, f.index) for f in report.findings} == {(h, commits[h]) for h in expected["overdue"]}
    assert all("deck shopping" in f.problem for f in report.findings)
    assert report.open_in_time == len(expected["pending"])
    assert report.ok is expected["ok"]
    assert report.last_entry is not None
    assert report.last_entry[0] == expected["last_entry_index"]
    assert report.last_entry[1] == decode(entries[expected["last_entry_index"]]).time_ms


def test_the_rule_does_not_read_the_auditors_clock() -> None:
    """The auditor takes no clock at all: the same log gives the same answer at any time."""
    import inspect

    assert "now" not in " ".join(inspect.signature(Auditor).parameters)


def test_the_vectors_are_what_the_generator_makes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "vectors" / "generate_audit.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
