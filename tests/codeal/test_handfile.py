"""The co-dealt hand proof (docs/hand-proof.md, format 3) and ``fairdeck verify`` on it: a valid
file verifies; each edit is refused at the step of docs/codealing-spec.md section 10 it breaks."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.handfile import CodealerSignatures, CodealHandProof
from fairdeck.codeal.identity import key_statement, shuffle_statement, sign
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.local import codeal_local
from fairdeck.core.decks import DeckSpec
from tests.support.env import clean_env

IDENTITY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PINNED = IDENTITY.public_key().public_bytes_raw()


@pytest.fixture(scope="module")
def proof() -> CodealHandProof:
    hand = codeal_local("short", "hf-1", 2, [0, 1, 2], random.Random(7).randbytes)
    spec = DeckSpec.parse("short")
    records = [KeyRecord.decode(k, i) for i, k in enumerate(hand.keys)]
    ctx = HandContext(spec, hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    identity = CodealerSignatures(
        1,
        PINNED,
        sign(IDENTITY, key_statement(spec, hand.hand_id, 1, 2, hand.keys[1])),
        sign(IDENTITY, shuffle_statement(ctx, hand.shuffles[1])),
    )
    return CodealHandProof(hand, (identity,))


def test_a_hand_proof_round_trips_and_verifies_against_the_pinned_codealer(proof: CodealHandProof) -> None:
    again = CodealHandProof.from_json(proof.to_json())
    assert again == proof
    again.verify([PINNED])


def edited(proof: CodealHandProof, edit: object) -> str:
    data = json.loads(proof.to_json())
    edit(data)  # type: ignore[operator]
    return json.dumps(data)


@pytest.mark.parametrize(
    ("name", "edit", "step"),
    [
        ("a skipped co-dealer shuffle", lambda d: d["codeal"]["shuffles"].pop(), "transcript"),
        ("another identity key", lambda d: d["codeal"]["identities"][0].update(key="00" * 32), "key"),
        (
            "a share with a flipped byte",
            lambda d: d["codeal"]["dealt"][0]["shares"].__setitem__(
                1, "01" + d["codeal"]["dealt"][0]["shares"][1][2:]
            ),
            "encoding",
        ),
        (
            "a card claimed that the shares do not open",
            lambda d: d["codeal"]["dealt"][0].update(card="X1"),
            "encoding",
        ),
        (
            "upper-case hex",
            lambda d: d["codeal"]["seeds"].__setitem__(0, d["codeal"]["seeds"][0].upper()),
            "encoding",
        ),
    ],
)
def test_an_edited_hand_proof_is_refused_at_its_step(
    proof: CodealHandProof, name: str, edit: object, step: str
) -> None:
    with pytest.raises(CodealError) as e:
        CodealHandProof.from_json(edited(proof, edit)).verify([PINNED])
    assert e.value.step == step, name


def test_a_wrong_card_claimed_is_refused_at_the_open_step(proof: CodealHandProof) -> None:
    first, second = proof.hand.dealt[0].card, proof.hand.dealt[1].card
    from fairdeck.core.cards import Card

    text = edited(proof, lambda d: d["codeal"]["dealt"][0].update(card=Card.from_id(second).code))
    with pytest.raises(CodealError) as e:
        CodealHandProof.from_json(text).verify([PINNED])
    assert e.value.step == "open" and first != second


def run_verify(path: Path, *keys: str) -> subprocess.CompletedProcess[str]:
    flags = [f for k in keys for f in ("--codealer-key", k)]
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "verify", str(path), *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )


def test_fairdeck_verify_checks_a_codealt_hand_proof(proof: CodealHandProof, tmp_path: Path) -> None:
    good = tmp_path / "hand.json"
    good.write_text(proof.to_json())
    out = run_verify(good, PINNED.hex())
    assert out.returncode == 0 and out.stdout.startswith("OK: co-dealt hand hf-1 verified"), (
        out.stdout + out.stderr
    )
    bad = tmp_path / "skipped.json"
    bad.write_text(edited(proof, lambda d: d["codeal"]["shuffles"].pop()))
    out = run_verify(bad, PINNED.hex())
    assert out.returncode == 1 and out.stdout.startswith("FAILED at step transcript"), out.stdout
    out = run_verify(good)
    assert out.returncode == 2 and "--codealer-key" in out.stderr and "Traceback" not in out.stderr
