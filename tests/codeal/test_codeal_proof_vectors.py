"""Format 4, the co-dealt hand proof (docs/hand-proof.md), on its known-answer vectors
(docs/vectors/fairdeck-codeal-proofs-v1.json): ``fairdeck verify`` prints each case's line, and it
chooses format 4 by the parsed ``format`` field, never by a substring of the file's bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli.commands import main as fairdeck
from tests.support.codeal_proof_vectors import CASES, PROOFS, VECTORS


def verify(tmp_path: Path, text: str, *flags: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "hand.json"
    path.write_bytes(text.encode("utf-8"))
    status = fairdeck(["verify", str(path), *flags])
    out = capsys.readouterr()
    return status, out.out + out.err


def test_the_file_is_what_the_script_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(VECTORS / "generate_codeal_proofs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_every_step_has_an_invalid_case() -> None:
    steps = {c["step"] for c in PROOFS["invalid"]}
    assert steps == {"format", "encoding", "key", "transcript", "shuffle", "share", "open", "seed"}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_fairdeck_verify_prints_the_line_of_every_vector(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = [f for k in case["codealer_keys"] for f in ("--codealer-key", k)]
    status, out = verify(tmp_path, case["text"], *flags, capsys=capsys)
    assert out.splitlines()[0] == case["line"]
    assert status == (0 if "step" not in case else 1)


def test_a_format_4_proof_whose_codeal_comes_after_64_kib_is_read_as_format_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bug: `fairdeck verify` looked for the bytes "codeal" in the first 64 KiB to tell a co-dealt
    proof from an ordinary one; past them, a valid format-4 proof failed as an unknown format."""
    case = next(c for c in PROOFS["valid"] if "after 64 KiB" in c["name"])
    assert case["text"].index('"codeal"') > 64 * 1024
    status, out = verify(tmp_path, case["text"], "--codealer-key", case["codealer_keys"][0], capsys=capsys)
    assert (status, out.splitlines()[0]) == (0, case["line"])


def test_an_ordinary_proof_that_holds_the_bytes_codeal_is_read_as_its_own_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same bug the other way: a format-1 proof whose display-only log_key is the text "codeal"
    was sent to the co-dealt reader, and a valid hand was refused (or asked for a co-dealer key)."""
    v1 = json.loads((VECTORS / "fairdeck-hand-proofs-v1.json").read_text(encoding="utf-8"))
    proof = json.loads(v1["valid"][0]["text"])
    proof["log_key"] = "codeal"
    text = json.dumps(proof, indent=2)
    assert '"codeal"' in text
    status, out = verify(tmp_path, text, "--key", v1["log_key"], capsys=capsys)
    assert status == 0 and out.startswith("OK: hand "), out


def test_a_format_1_proof_with_a_codeal_object_is_refused_at_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old shape (a "codeal" object inside formats 1 to 3) is no hand proof: a co-dealt hand's
    proof is format 4 (docs/codealing-spec.md section 11)."""
    v1 = json.loads((VECTORS / "fairdeck-hand-proofs-v1.json").read_text(encoding="utf-8"))
    proof = json.loads(v1["valid"][0]["text"])
    proof["codeal"] = json.loads(PROOFS["valid"][0]["text"])["codeal"]
    status, out = verify(tmp_path, json.dumps(proof), "--key", v1["log_key"], capsys=capsys)
    assert status == 1 and out.startswith("FAILED at step format: a hand proof of format 1 has exactly"), out


def test_an_unknown_format_names_every_format_this_verifier_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bug: once format 4 was read, a proof of format 5 was still told "this verifier reads 1,
    2 and 3", sending a player with a co-dealt proof looking for another verifier. Format 5 is now
    read (the co-dealt proof with its receipts), so the unknown format is 6."""
    v1 = json.loads((VECTORS / "fairdeck-hand-proofs-v1.json").read_text(encoding="utf-8"))
    proof = json.loads(v1["valid"][0]["text"])
    proof["format"] = 6
    status, out = verify(tmp_path, json.dumps(proof), "--key", v1["log_key"], capsys=capsys)
    assert status == 1
    line = "FAILED at step format: unknown hand proof format 6; this verifier reads 1 to 5"
    assert out.splitlines()[0] == line
