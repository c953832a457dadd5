"""Format 5, the co-dealt hand proof with its log receipts and seal statements (docs/hand-proof.md),
on its known-answer vectors (docs/vectors/fairdeck-codeal-proofs-v2.json): ``fairdeck verify``
prints each case's line, the package reads and writes the same text, and the log key is the user's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli.commands import main as fairdeck
from fairdeck.codeal.logged_proof import LoggedCodealProof
from fairdeck.log.handproof import read_value
from fairdeck.log.note import Verifier
from tests.support.codeal_proof_vectors import CASES_V2, PROOFS_V2

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "vectors"
PROOFS, CASES = PROOFS_V2, CASES_V2


def flags(case: dict[str, Any]) -> list[str]:
    keys = [f for k in case["codealer_keys"] for f in ("--codealer-key", k)]
    return keys + [f for k in case["log_keys"] for f in ("--key", k)]


def verify(tmp_path: Path, text: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "hand.json"
    path.write_bytes(text.encode("utf-8"))
    status = fairdeck(["verify", str(path), *args])
    out = capsys.readouterr()
    return status, out.out + out.err


def test_the_file_is_what_the_script_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(VECTORS / "generate_codeal_proofs_v2.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_every_step_format_5_adds_has_an_invalid_case() -> None:
    steps = {c["step"] for c in PROOFS["invalid"]}
    assert {"seal", "entries", "rotations", "checkpoint", "inclusion", "order"} <= steps
    assert {"format", "encoding", "key", "seed"} <= steps


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_fairdeck_verify_prints_the_line_of_every_vector(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = verify(tmp_path, case["text"], flags(case), capsys)
    assert out.splitlines()[0] == case["line"]
    assert status == (0 if "step" not in case else 1)


@pytest.mark.parametrize("case", PROOFS["valid"], ids=[c["name"] for c in PROOFS["valid"]])
def test_the_package_reads_and_writes_each_valid_proof_as_it_is(case: dict[str, Any]) -> None:
    proof = LoggedCodealProof.from_value(read_value(case["text"]))
    assert proof.to_json() == case["text"]
    keys = [bytes.fromhex(k) for k in case["codealer_keys"]]
    checkpoint = proof.verify(keys, [Verifier.parse(k) for k in case["log_keys"]])
    assert case["line"].endswith(f"in the log at tree size {checkpoint.size})")


def test_a_format_5_proof_needs_the_log_key_from_the_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The receipts are checked against the log key the player gives, never the file's log_key:
    without --key, one line saying so and exit 2, not a verdict."""
    case = PROOFS["valid"][0]
    keys = [f for k in case["codealer_keys"] for f in ("--codealer-key", k)]
    status, out = verify(tmp_path, case["text"], keys, capsys)
    assert status == 2
    assert out.count("\n") == 1 and "give --key" in out, out


def test_the_log_key_written_in_the_file_plays_no_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = next(c for c in PROOFS["invalid"] if c["name"] == "another log key given")
    assert json.loads(case["text"])["log_key"] != case["log_keys"][0]
    status, out = verify(tmp_path, case["text"], flags(case), capsys)
    assert status == 1 and out.startswith("FAILED at step checkpoint: ")
