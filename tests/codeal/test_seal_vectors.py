"""docs/vectors/fairdeck-codeal-seal-v1.json against the reference: the seat's device's check of the
co-dealers' seal statements (docs/codealing-spec.md 9.1, 9.2) gives each case's line, the statement
is the bytes section 9.1 writes, and the file is what its generator writes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from fairdeck.codeal.elgamal import V
from fairdeck.codeal.seal_statement import seal_statement
from fairdeck.core.encoding import lp, u32
from tests.support.codeal_seal_vectors import ROOT, SEAL_VECTORS, context, device_line, flipped_seal_cases


@pytest.mark.parametrize("case", SEAL_VECTORS["cases"], ids=lambda c: c["name"])
def test_each_seal_vector_gives_its_line(case: dict[str, Any]) -> None:
    line = device_line(case)
    assert line == case["line"]
    assert line.startswith("OK: ") == case["name"].startswith("valid"), line


def test_the_attack_vectors_name_the_position_and_say_the_dealer_may_have_read_it() -> None:
    lines = {c["name"]: c["line"] for c in SEAL_VECTORS["cases"]}
    assert lines["sealed to the house's key, the genuine statement relayed"] == (
        "FAILED at step seal: position 0 was sealed by co-dealer 1 to another key: "
        "the dealer may have read this card"
    )


def test_the_statement_is_the_bytes_of_section_9_1_signed_by_co_dealer_1() -> None:
    s = SEAL_VECTORS["statement"]
    ctx = context(SEAL_VECTORS["hands"][s["hand"]])
    seat, digest = bytes.fromhex(s["seat_public_key"]), bytes.fromhex(s["sealed_share_sha256"])
    written = lp(f"{V} identity seal".encode()) + ctx.encoded + u32(0) + u32(1) + seat + digest
    assert bytes.fromhex(s["bytes"]) == written == seal_statement(ctx, 0, 1, seat, digest)
    pinned = bytes.fromhex(SEAL_VECTORS["cases"][0]["identity_keys"][0])
    Ed25519PublicKey.from_public_bytes(pinned).verify(bytes.fromhex(s["signature"]), written)
    sealed = bytes.fromhex(SEAL_VECTORS["cases"][0]["sealed"][1])
    assert hashlib.sha256(sealed).digest() == digest


def test_the_file_is_what_the_generator_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "vectors" / "generate_codeal_seal.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


def test_a_flipped_bit_anywhere_in_a_statement_or_a_sealed_share_is_refused() -> None:
    lines = [device_line(c) for c in flipped_seal_cases(60, seed=91)]
    assert not [line for line in lines if line.startswith("OK")]
    assert all(line.startswith(("FAILED at step seal: ", "FAILED at step encoding: ")) for line in lines), (
        lines
    )
