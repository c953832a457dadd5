"""One-file hand proofs (docs/hand-proof.md) from a real dealer on loopback: every deck, the CLI
round trip, and each tampering named at its step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client import AuditClient, DealerClient
from fairdeck.core.decks import SPEC_NAMES
from fairdeck.core.errors import VerificationError
from fairdeck.log.cosignature import Cosigner, WitnessPolicy
from fairdeck.log.handproof import HandProof
from fairdeck.log.note import Signer, Verifier
from tests.support.dealers import RunningDealer, deal_closed_hand

CLI = [sys.executable, "-m", "fairdeck.cli"]


@pytest.fixture(scope="module")
def served(unlimited_dealer: RunningDealer) -> tuple[str, str]:
    data = unlimited_dealer.data_dir
    target = unlimited_dealer.target
    vkey = subprocess.run([*CLI, "key", "--data", str(data)], capture_output=True, text=True, check=True)
    return target, vkey.stdout.strip()


deal_closed = deal_closed_hand


@pytest.mark.parametrize("deck", SPEC_NAMES)
def test_every_deck_gives_a_proof_that_verifies_offline(served: tuple[str, str], deck: str) -> None:
    target, vkey = served
    hand_id = deal_closed(target, deck)
    with AuditClient(target, verifier=vkey) as log:
        proof = log.hand_proof(hand_id)
    again = HandProof.from_json(proof.to_json())
    assert again == proof
    checkpoint = again.verify(Verifier.parse(vkey))
    assert checkpoint.size > proof.reveal.index
    assert len(proof.dealt) == 5 and proof.dealt == tuple(proof.transcript.codes()[:5])


def test_hand_get_and_verify_on_the_command_line(served: tuple[str, str], tmp_path: Path) -> None:
    target, vkey = served
    hand_id = deal_closed(target, "shoe-8", draws=20)
    out = tmp_path / "hand.json"
    got = subprocess.run([*CLI, "hand", "get", hand_id, "--target", target, "--key", vkey, "--out", str(out)],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert got.returncode == 0, got.stderr
    ok = subprocess.run([*CLI, "verify", str(out), "--key", vkey], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith(f"OK: hand {hand_id} verified (shoe-8, 20 of 416"), (
        ok.stdout
    )
    no_key = subprocess.run([*CLI, "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert no_key.returncode == 2 and "--key" in no_key.stderr
    with DealerClient(target) as client:
        still_open = client.open_hand("standard").hand_id
    refused = subprocess.run([*CLI, "hand", "get", still_open, "--target", target, "--key", vkey],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "is not closed" in refused.stderr and "Traceback" not in refused.stderr


def _tampered(proof: HandProof, change: Any) -> str:
    d = proof.to_dict()
    change(d)
    return json.dumps(d)


def test_each_tampering_is_named_at_its_step(served: tuple[str, str]) -> None:
    target, vkey = served
    with AuditClient(target, verifier=vkey) as log:
        proof = log.hand_proof(deal_closed(target, "standard"))
        other = log.hand_proof(deal_closed(target, "standard"))
    key = Verifier.parse(vkey)

    def flip_seed(
        d: dict[str, Any],
    ) -> None:  # its first byte, to another value (once "00", 1 in 256 the same)
        seed = d["transcript"]["server_seed"]
        d["transcript"]["server_seed"] = ("01" if seed.startswith("00") else "00") + seed[2:]

    def swap_cards(d: dict[str, Any]) -> None:
        cards = d["transcript"]["cards"]
        cards[0], cards[1] = cards[1], cards[0]

    def wrong_dealt(d: dict[str, Any]) -> None:
        d["dealt"][0] = d["transcript"]["cards"][10]

    def other_commit(d: dict[str, Any]) -> None:
        d["commit"] = other.to_dict()["commit"]

    def bad_hash(d: dict[str, Any]) -> None:
        d["reveal"]["hashes"][0] = "A" * 43 + "="

    def other_checkpoint(d: dict[str, Any]) -> None:
        note = d["reveal"]["signed_checkpoint"]
        d["reveal"]["signed_checkpoint"] = d["commit"]["signed_checkpoint"] = (
            note.replace("\n\n", "\n\n", 1)[:-5] + "AAAA\n"
        )

    cases = [
        ("format", lambda d: d.update(format=2)),
        ("format", lambda d: d.update(extra=1)),
        ("format", lambda d: d.update(type="something-else")),
        ("commitment", flip_seed),
        ("deck", swap_cards),
        ("cards", wrong_dealt),
        ("entries", other_commit),
        ("checkpoint", other_checkpoint),
        ("inclusion", bad_hash),
    ]
    for step, change in cases:
        with pytest.raises(VerificationError) as e:
            HandProof.from_json(_tampered(proof, change)).verify(key)
        assert e.value.step == step, (step, e.value)
    with pytest.raises(VerificationError) as e:  # a proof checked against another log's key
        proof.verify(Signer.from_seed(key.name, bytes(32)).verifier)
    assert e.value.step == "checkpoint"
    policy = WitnessPolicy({"w1": Cosigner.from_seed("w.test/1", bytes(32)).verifier}, 1)
    with pytest.raises(VerificationError) as e:
        proof.verify(key, policy)
    assert e.value.step == "cosignatures" and "missing w1" in e.value.detail
    text = proof.to_json()
    duplicate = text.replace('"dealt": [', '"dealt": [], "dealt": [', 1)
    with pytest.raises(VerificationError) as e:
        HandProof.from_json(duplicate)
    assert e.value.step == "format"
    with pytest.raises(VerificationError) as e:
        HandProof.from_json(b" " * (1024 * 1024 + 1))
    assert e.value.step == "format"
