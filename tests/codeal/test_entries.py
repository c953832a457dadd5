"""The co-dealt log entries (docs/log-format.md, "Co-dealt entries"): every vector encodes to its
bytes and decodes back; every invalid vector is refused; the vectors are what the generator makes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.codeal.entries import CodealEntry, decode_entry
from fairdeck.codeal.errors import CodealError

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-codeal-log-v1.json").read_text())


@pytest.mark.parametrize("case", VECTORS["entries"], ids=lambda c: c["name"])
def test_each_entry_encodes_to_its_bytes_and_decodes_back(case: dict[str, Any]) -> None:
    entry = CodealEntry(
        case["type"],
        case["time_ms"],
        case["hand_id"],
        case["deck"],
        tuple(bytes.fromhex(r) for r in case["records"]),
        case["position"],
    )
    assert entry.encode().hex() == case["entry"]
    assert decode_entry(bytes.fromhex(case["entry"])) == entry


@pytest.mark.parametrize("case", VECTORS["invalid_entries"], ids=lambda c: c["name"])
def test_each_invalid_entry_is_refused(case: dict[str, Any]) -> None:
    with pytest.raises(CodealError) as e:
        decode_entry(bytes.fromhex(case["entry"]))
    assert e.value.step == "encoding"


def test_the_type_bytes_are_the_ones_log_format_assigns() -> None:
    assert sorted({c["type"] for c in VECTORS["entries"]}) == [3, 4, 5, 6]
    text = (ROOT / "docs" / "log-format.md").read_text()
    for kind in (3, 4, 5, 6):
        assert f'"FDL1" || u8({kind})' in text


def test_the_vectors_are_what_the_generator_makes() -> None:
    script = ROOT / "docs" / "vectors" / "generate_codeal_log.py"
    assert subprocess.run([sys.executable, str(script), "--check"], timeout=120).returncode == 0
