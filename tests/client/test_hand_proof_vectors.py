"""docs/vectors/fairdeck-hand-proofs-v1.json through the package and through `fairdeck verify`: every
valid proof verifies, every broken one fails at its step (the browser verifier is held to the same)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.core.errors import VerificationError
from fairdeck.log.handproof import STEPS, HandProof
from fairdeck.log.note import Verifier

ROOT = Path(__file__).resolve().parents[2]
VECTORS: dict[str, Any] = json.loads((ROOT / "docs" / "vectors" / "fairdeck-hand-proofs-v1.json").read_text())
KEY = Verifier.parse(VECTORS["log_key"])


@pytest.mark.parametrize("case", VECTORS["valid"], ids=lambda c: c["name"])
def test_valid_proofs_verify(case: dict[str, Any]) -> None:
    HandProof.from_json(case["text"]).verify(KEY)


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=lambda c: c["name"])
def test_broken_proofs_fail_at_their_step(case: dict[str, Any]) -> None:
    with pytest.raises(VerificationError) as e:
        HandProof.from_json(case["text"]).verify(KEY)
    assert e.value.step == case["step"]


def test_the_vectors_cover_every_step_but_cosignatures() -> None:
    # Statements are carried by format 3 alone: its own vectors cover step rotations.
    assert {c["step"] for c in VECTORS["invalid"]} == set(STEPS) - {"cosignatures", "rotations"}


def test_fairdeck_verify_gives_the_same_verdicts(tmp_path: Path) -> None:
    for case, want in [(VECTORS["valid"][0], None), *((c, c["step"]) for c in VECTORS["invalid"])]:
        path = tmp_path / "proof.json"
        path.write_text(case["text"], encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "fairdeck.cli", "verify", str(path), "--key", VECTORS["log_key"]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if want is None:
            assert done.returncode == 0 and done.stdout.startswith("OK:"), done
        else:
            assert done.returncode == 1 and done.stdout.startswith(f"FAILED at step {want}:"), (
                case["name"],
                done,
            )


def test_a_receipt_index_of_minus_zero_is_not_plain_digits(tmp_path: Path) -> None:
    """Read inside a hand proof, a receipt is as strict as alone (docs/log-format.md: plain digits).

    The reader once re-read the receipts through Python's json, which turned ``-0`` into ``0`` and
    accepted it, so it and the browser verifier could have disagreed on a file."""
    text = VECTORS["valid"][0]["text"]
    assert '"index": 0,' in text
    bent = text.replace('"index": 0,', '"index": -0,', 1)
    with pytest.raises(VerificationError) as e:
        HandProof.from_json(bent)
    assert e.value.step == "format" and "plain digits" in e.value.detail
    path = tmp_path / "proof.json"
    path.write_text(bent, encoding="utf-8")
    argv = [sys.executable, "-m", "fairdeck.cli", "verify", str(path), "--key", VECTORS["log_key"]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout.startswith("FAILED at step format:"), done
