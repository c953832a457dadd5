"""docs/vectors/fairdeck-codeal-release-v1.json against docs/codealing-spec.md 9.3, written out here
from the text (X25519, HKDF-SHA256, the release info): each case's token, its line on the seat's
device, whether it is the co-dealer's recorded digest, and the file is what its generator writes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fairdeck.codeal.elgamal import V
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.seal import seat_release
from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp, u32

ROOT = Path(__file__).resolve().parent.parent.parent
VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-codeal-release-v1.json").read_text())


def spec_release(case: dict[str, Any], label: str = "seal release") -> bytes:
    """Section 9.3 as written: HKDF-SHA256(X25519(seat_sk, epk), release info), L = 32."""
    secret = X25519PrivateKey.from_private_bytes(bytes.fromhex(VECTORS["seats"][case["seat"]]))
    epk = bytes.fromhex(VECTORS["seals"][case["seal"]]["sealed"])[:32]
    seat_pk = secret.public_key().public_bytes_raw()
    info = (
        lp(f"{V} {label}".encode())
        + lp(case["deck"].encode())
        + lp(case["hand_id"].encode())
        + u32(case["position"])
        + u32(case["holder"])
        + epk
        + seat_pk
    )
    z = secret.exchange(X25519PublicKey.from_public_bytes(epk))
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(z)


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_each_release_vector_is_the_spec_formula_and_gives_its_line(case: dict[str, Any]) -> None:
    token = spec_release(case)
    assert token.hex() == case["release"]
    seal = VECTORS["seals"][case["seal"]]
    assert (hashlib.sha256(token).hexdigest() == seal["release_sha256"]) is case["matches"]
    assert case["matches"] is case["name"].startswith("valid")
    args = (DeckSpec.parse(case["deck"]), case["hand_id"], case["position"], case["holder"])
    sealed, secret = bytes.fromhex(seal["sealed"]), bytes.fromhex(VECTORS["seats"][case["seat"]])
    try:
        line = f"OK: release {seat_release(*args, sealed, secret).hex()}"
    except CodealError as e:
        line = f"FAILED at step {e.step}: {e.detail}"
    assert line == case["line"]


def test_a_wrong_seat_position_hand_holder_or_deck_gives_another_token() -> None:
    valid = {c["seal"]: c["release"] for c in VECTORS["cases"] if c["name"].startswith("valid")}
    invalid = [c for c in VECTORS["cases"] if c["name"].startswith("invalid")]
    assert len(invalid) >= 5
    assert all(c["release"] != valid[c["seal"]] for c in invalid)
    assert len({c["release"] for c in VECTORS["cases"]}) == len(VECTORS["cases"])


def test_the_release_is_not_the_seal_key() -> None:
    """The label separates the release from the seal's AEAD key (section 9 uses "seal")."""
    for case in VECTORS["cases"]:
        assert spec_release(case, "seal") != spec_release(case)
    assert VECTORS["label"] == "seal release"


def test_the_file_is_what_the_generator_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "vectors" / "generate_codeal_release.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
