"""The co-dealt checks of the audit (docs/log-format.md, "The audit"; fairdeck.codeal.log_audit)
against docs/vectors/fairdeck-codeal-audit-v1.json: each run of entries gets exactly its findings,
in order, and its counts of hands verified and still open; the vectors are what the generator
makes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.codeal.log_audit import CodealLogAudit
from fairdeck.log import merkle
from fairdeck.log.audit import Auditor
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.logentry import CommitEntry
from fairdeck.log.note import Signer

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "vectors"
CASES = json.loads((VECTORS / "fairdeck-codeal-audit-v1.json").read_text())["cases"]
NAMED = {
    e["name"]: bytes.fromhex(e["entry"])
    for e in json.loads((VECTORS / "fairdeck-codeal-log-v1.json").read_text())["entries"]
}


def entry(item: str | dict[str, str]) -> bytes:
    return NAMED[item] if isinstance(item, str) else bytes.fromhex(item["hex"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_each_run_of_entries_gets_its_findings(case: dict[str, Any]) -> None:
    audit = CodealLogAudit()
    found = []
    for index, item in enumerate(case["entries"]):
        time_ms, problems = audit.add(index, entry(item))
        found += problems
        assert time_ms is None or time_ms > 0
    found += audit.finish()
    assert found == [(f["index"], f["hand_id"], f["problem"]) for f in case["findings"]]
    assert (audit.verified, audit.open) == (case["verified"], case["open"])
    # A hand checked or found bad keeps none of its records: the audit's memory stays small per hand.
    assert all(not (h.keys or h.shuffles or h.dealt) for h in audit.hands.values() if h.done or h.broken)


def test_the_cases_cover_every_rule() -> None:
    problems = " ".join(f["problem"] for c in CASES for f in c["findings"])
    for words in (
        "does not parse",
        "no setup entry",
        "already in the log",
        "where holder 0's is due",
        "shuffle entries (section 11: every shuffle",
        "where position 0's is due",
        "after the hand's seeds entry",
        "has 1 shuffle entries",
        "fails at step share",
        "fails at step seed",
    ):
        assert words in problems, words
    assert any(c["verified"] and not c["findings"] for c in CASES)


def test_the_vectors_are_what_the_generator_makes() -> None:
    script = VECTORS / "generate_codeal_audit.py"
    assert subprocess.run([sys.executable, str(script), "--check"], timeout=120).returncode == 0


def audited(entries: list[bytes], *, checks: bool = True) -> list[tuple[int | None, str | None, str]]:
    """The whole auditor's findings over ``entries``, with a checkpoint signing them."""
    signer = Signer.generate("codeal.test/log")
    root = merkle.root([merkle.leaf_hash(e) for e in entries])
    note = sign_checkpoint(Checkpoint(signer.name, len(entries), root), signer)
    auditor = Auditor(
        signer.verifier,
        max_hand_lifetime_ms=10**12,
        checkpoints=[note],
        codeal=CodealLogAudit if checks else None,
    )
    for e in entries:
        auditor.add(e)
    return [(f.index, f.hand_id, f.problem) for f in auditor.finish().findings]


def test_one_hand_id_for_an_ordinary_and_a_codealt_hand_is_a_finding_either_way() -> None:
    opening = [NAMED[n] for n in ("setup", "shuffle/holder-0", "shuffle/holder-1")]
    hand_id = "codeal-log-1"
    commit = CommitEntry(1_700_000_000_000, hand_id, "fairdeck-v1", "standard", bytes(32)).encode()
    assert audited([commit, *opening]) == [
        (1, hand_id, "co-dealt setup entry for an ordinary hand already in the log")
    ]
    assert audited([*opening, commit]) == [(3, hand_id, "hand id committed twice")]


def test_an_auditor_given_no_codealt_checks_says_it_did_not_check_them() -> None:
    assert audited([NAMED["setup"]], checks=False) == [
        (0, None, "a co-dealt entry, and this auditor was given no co-dealt checks")
    ]
