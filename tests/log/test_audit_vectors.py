"""The overdue rule of docs/log-format.md ("Overdue hands") and its key rotation statements ("Key
rotation"), from their vectors (docs/vectors/fairdeck-audit-v1.json): each log through the auditor
gives exactly the overdue and pending hands the vector names; each statement verifies or not, and
each set of trusted keys and statements leads to the keys named; the vectors are what
generate_audit.py makes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.core.errors import VerificationError
from fairdeck.log.audit import Auditor
from fairdeck.log.logentry import CommitEntry, decode
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import open_signed_checkpoint
from fairdeck.log.rotation import RotationError, follow, open_rotation

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


# -- key rotation ---------------------------------------------------------------------------------

ROTATION: dict[str, Any] = VECTORS["rotation"]
STATEMENTS = {s["name"]: s for s in ROTATION["statements"]}


@pytest.mark.parametrize("statement", ROTATION["statements"], ids=lambda s: s["name"])
def test_rotation_statements(statement: dict[str, Any]) -> None:
    note = statement["note"].encode()
    if statement["valid"]:
        rotation = open_rotation(note)
        assert rotation.note == note and rotation.old != rotation.new
    else:
        with pytest.raises(RotationError):
            open_rotation(note)


@pytest.mark.parametrize("case", ROTATION["cases"], ids=lambda c: c["name"])
def test_rotation_cases(case: dict[str, Any]) -> None:
    trusted = [Verifier.parse(k) for k in case["trusted"]]
    notes = [STATEMENTS[name]["note"].encode() for name in case["statements"]]
    keys, _ = follow(trusted, notes)
    assert [k.to_string() for k in keys] == case["expected_keys"]
    checkpoint = case["checkpoint"].encode()
    if case["checkpoint_verifies"]:
        open_signed_checkpoint(checkpoint, keys)
    else:
        with pytest.raises(VerificationError):
            open_signed_checkpoint(checkpoint, keys)


def test_the_auditor_follows_a_rotation_and_says_so() -> None:
    """An audit given key 1 and the log's statements accepts key 2's checkpoint, and reports the
    rotation it followed; a statement that does not verify is a finding."""
    case = next(c for c in ROTATION["cases"] if c["name"] == "one-rotation")
    statement = STATEMENTS["1-to-2"]["note"].encode()
    checkpoint = case["checkpoint"].encode()
    auditor = Auditor(
        Verifier.parse(case["trusted"][0]), max_hand_lifetime_ms=1, checkpoints=[statement, checkpoint]
    )
    assert auditor.verifiers[-1].to_string() == ROTATION["keys"]["2"]
    assert [f.problem for f in auditor.report.findings] == []
    assert auditor.report.rotations == [open_rotation(statement).describe()]
    forged = STATEMENTS["new-only"]["note"].encode()
    auditor = Auditor(Verifier.parse(case["trusted"][0]), max_hand_lifetime_ms=1, checkpoints=[forged])
    assert auditor.report.rotations == []
    assert ["key rotation statement does not verify" in f.problem for f in auditor.report.findings] == [True]
