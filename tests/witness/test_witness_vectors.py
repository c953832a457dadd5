"""docs/vectors/fairdeck-witness-v1.json through the package and through our witness.

The add-checkpoint answers in the file are written from the tlog-witness text (by status), so
replaying them through ``fairdeck_server.witness`` checks our witness against the spec, not
against itself. Freshness of the file is checked with the other vectors (tests/core/test_vectors.py).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from fairdeck.log.cosignature import (
    CosignatureError,
    CosignatureVerifier,
    Cosigner,
    WitnessPolicy,
    parse_line,
    signed_message,
)
from fairdeck.log.note import Verifier
from fairdeck_server.witness.protocol import Witness
from fairdeck_server.witness.state import WitnessState

ROOT = Path(__file__).resolve().parents[2]
VECTORS: dict[str, Any] = json.loads((ROOT / "docs" / "vectors" / "fairdeck-witness-v1.json").read_text())


@pytest.mark.parametrize("key", VECTORS["witnesses"], ids=lambda k: k["name"])
def test_witness_keys(key: dict[str, Any]) -> None:
    cosigner = Cosigner.from_seed(key["name"], bytes.fromhex(key["seed"]))
    assert cosigner.verifier.to_string() == key["vkey"]
    assert f"{CosignatureVerifier.parse(key['vkey']).key_id:08x}" == key["key_id"]


@pytest.mark.parametrize("case", VECTORS["cosignatures"], ids=lambda c: c["name"])
def test_valid_cosignatures(case: dict[str, Any]) -> None:
    verifier = CosignatureVerifier.parse(case["vkey"])
    assert signed_message(case["checkpoint"], case["timestamp"]) == base64.b64decode(case["signed_message"])
    cosig = parse_line(case["line"], verifier)
    assert cosig.timestamp == case["timestamp"]
    assert verifier.verify(case["checkpoint"], cosig.timestamp, cosig.signature)


@pytest.mark.parametrize("case", VECTORS["invalid_cosignatures"], ids=lambda c: c["name"])
def test_invalid_cosignatures(case: dict[str, Any]) -> None:
    verifier = CosignatureVerifier.parse(case["vkey"])
    if case["expected"] == "malformed":
        with pytest.raises(CosignatureError):
            parse_line(case["line"], verifier)
    else:
        cosig = parse_line(case["line"], verifier)
        assert not verifier.verify(case["checkpoint"], cosig.timestamp, cosig.signature)


@pytest.mark.parametrize("case", VECTORS["policies"], ids=lambda c: c["name"])
def test_policies(case: dict[str, Any]) -> None:
    policy = WitnessPolicy.parse([f"{k}={v}" for k, v in case["witnesses"].items()], case["threshold"])
    note = case["note"].encode("utf-8")
    if case.get("expected") == "bad cosignature":
        with pytest.raises(CosignatureError):
            policy.check(note)
        return
    result = policy.check(note)
    assert (result.ok, list(result.signed), list(result.missing)) == (
        case["ok"],
        case["signed"],
        case["missing"],
    )


def test_add_checkpoint_answers_are_the_specs(tmp_path: Path) -> None:
    script = VECTORS["add_checkpoint"]
    (w1,) = [k for k in VECTORS["witnesses"] if k["name"] == script["witness"]]
    log_key = Verifier.parse(VECTORS["log_vkey"])
    witness = Witness(
        Cosigner.from_seed(w1["name"], bytes.fromhex(w1["seed"])),
        {log_key.name: [log_key]},
        WitnessState(tmp_path / "w.db"),
        clock=lambda: float(script["time"]),
    )
    for request in script["requests"]:
        answer = witness.add_checkpoint(base64.b64decode(request["body"]))
        assert answer.status == request["status"], (request["name"], answer.body)
        if request["answer"] is not None:
            assert answer.body.decode() == request["answer"], request["name"]
    assert {r["status"] for r in script["requests"]} == {200, 400, 403, 404, 409, 422}
