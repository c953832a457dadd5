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
