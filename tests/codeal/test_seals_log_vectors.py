"""The seals entry (type 7; docs/log-format.md, "Co-dealt entries") and its audit against
docs/vectors/fairdeck-codeal-seals-log-v1.json: the entry encodes to its bytes and decodes back,
every invalid one is refused, each run of entries gets exactly its findings and counts, and the
vectors are what the generator makes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.codeal.entries import SEALS, CodealEntry, decode_entry
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.log_audit import CodealLogAudit

VECTORS = Path(__file__).resolve().parents[2] / "docs" / "vectors"
SEALS_LOG = json.loads((VECTORS / "fairdeck-codeal-seals-log-v1.json").read_text())
NAMED = {
    e["name"]: bytes.fromhex(e["entry"])
    for file in (json.loads((VECTORS / "fairdeck-codeal-log-v1.json").read_text()), SEALS_LOG)
    for e in file["entries"]
}


@pytest.mark.parametrize("case", SEALS_LOG["entries"], ids=lambda c: c["name"])
def test_the_seals_entry_encodes_to_its_bytes_and_decodes_back(case: dict[str, Any]) -> None:
    records = tuple(
        s["position"].to_bytes(4, "big")
        + bytes.fromhex(s["seat_key"])
        + bytes.fromhex(s["sealed_sha256"])
        + bytes.fromhex(s["signature"])
        for s in case["seals"]
    )
    entry = CodealEntry(SEALS, case["time_ms"], case["hand_id"], records=records, position=case["holder"])
    assert case["type"] == SEALS == 7
    assert entry.encode().hex() == case["entry"]
    decoded = decode_entry(bytes.fromhex(case["entry"]))
    assert decoded == entry
    assert [p for p, *_ in decoded.seals()] == [s["position"] for s in case["seals"]]


@pytest.mark.parametrize("case", SEALS_LOG["invalid_entries"], ids=lambda c: c["name"])
def test_each_invalid_seals_entry_is_refused(case: dict[str, Any]) -> None:
    with pytest.raises(CodealError) as e:
        decode_entry(bytes.fromhex(case["entry"]))
    assert e.value.step == "encoding"


@pytest.mark.parametrize("case", SEALS_LOG["audit_cases"], ids=lambda c: c["name"])
def test_each_run_with_seals_gets_its_findings(case: dict[str, Any]) -> None:
    audit = CodealLogAudit(codealer_keys=tuple(bytes.fromhex(k) for k in case["codealer_keys"]))
    found = []
    for index, item in enumerate(case["entries"]):
        found += audit.add(index, NAMED[item] if isinstance(item, str) else bytes.fromhex(item["hex"]))[1]
    found += audit.finish()
    assert found == [(f["index"], f["hand_id"], f["problem"]) for f in case["findings"]]
    counts = (audit.verified, audit.open, audit.repeated, audit.seals_verified, audit.unsealed)
    assert counts == tuple(case[n] for n in ("verified", "open", "repeated", "seals_verified", "unsealed"))


def test_a_statement_altered_or_naming_another_key_fails_only_under_the_pinned_key() -> None:
    """Without the co-dealer's key the log cannot tell a signature from noise: only the structure is
    checked, and the report says no seals were verified."""
    cases = {c["name"]: c for c in SEALS_LOG["audit_cases"]}
    for name in ("a signature altered, keys pinned", "a statement naming another seat key, keys pinned"):
        [finding] = cases[name]["findings"]
        assert finding["hand_id"] == "codeal-log-1" and "position 1:" in finding["problem"]
    assert cases["a signature altered, no keys"]["findings"] == []
    assert cases["a signature altered, no keys"]["seals_verified"] == 0
    assert cases["a closed hand with its seals, keys pinned"]["seals_verified"] == 1


def test_the_type_byte_is_the_one_log_format_assigns() -> None:
    text = (VECTORS.parent / "log-format.md").read_text()
    assert '"FDL1" || u8(7)' in text


def test_the_vectors_are_what_the_generator_makes() -> None:
    script = VECTORS / "generate_codeal_seals_log.py"
    assert subprocess.run([sys.executable, str(script), "--check"], timeout=120).returncode == 0
