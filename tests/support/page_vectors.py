"""The vectors of docs/vectors that a player's page meets, loaded once: transcripts, raw texts,
hand proofs of formats 1 to 3, the log's and the witnesses' vectors (``cases`` lists the ones the
page and `fairdeck verify` must judge alike), and the two test witnesses behind ``POLICY``."""

from __future__ import annotations

import json
from typing import Any

from fairdeck.log.cosignature import Cosigner
from tests.support import browser

VECTORS = browser.VECTORS
TRANSCRIPTS: dict[str, Any] = json.loads((VECTORS / "fairdeck-v1.json").read_text())
TEXTS: dict[str, Any] = json.loads((VECTORS / "fairdeck-v1-texts.json").read_text())
PROOFS: dict[str, Any] = json.loads((VECTORS / "fairdeck-hand-proofs-v1.json").read_text())
PROOFS_V2: dict[str, Any] = json.loads((VECTORS / "fairdeck-hand-proofs-v2.json").read_text())
PROOFS_V3: dict[str, Any] = json.loads((VECTORS / "fairdeck-hand-proofs-v3.json").read_text())
LOG: dict[str, Any] = json.loads((VECTORS / "fairdeck-log-v1.json").read_text())
WITNESS: dict[str, Any] = json.loads((VECTORS / "fairdeck-witness-v1.json").read_text())
FIELDS = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")


Key = str | list[str] | None


def cases() -> list[tuple[str, bytes, Key, str | None]]:
    """(id, bytes, key or keys, the step the vector names or None for valid)."""
    out: list[tuple[str, bytes, Key, str | None]] = []
    for v in TRANSCRIPTS["valid"]:
        out.append(
            (f"transcript valid: {v['name']}", json.dumps({k: v[k] for k in FIELDS}).encode(), None, None)
        )
    for v in TRANSCRIPTS["invalid"]:
        text = json.dumps(v["transcript"], ensure_ascii=False).encode("utf-8")
        out.append((f"transcript invalid: {v['name']}", text, None, v["expected_step"]))
    for v in TEXTS["texts"]:
        out.append((f"text: {v['name']}", bytes.fromhex(v["text"]), None, v["expected_step"]))
    for v in PROOFS["valid"]:
        out.append((f"proof valid: {v['name']}", v["text"].encode("utf-8"), PROOFS["log_key"], None))
    bent = PROOFS["valid"][0]["text"].replace('"index": 0,', '"index": -0,', 1)
    out.append(("proof invalid: a receipt index of -0", bent.encode("utf-8"), PROOFS["log_key"], "format"))
    for v in PROOFS["invalid"]:
        out.append((f"proof invalid: {v['name']}", v["text"].encode("utf-8"), PROOFS["log_key"], v["step"]))
    for v in PROOFS_V2["valid"]:
        out.append((f"proof v2 valid: {v['name']}", v["text"].encode("utf-8"), PROOFS_V2["log_key"], None))
    for v in PROOFS_V2["invalid"]:
        text = v["text"].encode("utf-8")
        out.append((f"proof v2 invalid: {v['name']}", text, PROOFS_V2["log_key"], v["step"]))
    for v in [*PROOFS_V3["valid"], *PROOFS_V3["invalid"]]:
        keys = [PROOFS_V3["keys"][name] for name in v["keys"]]
        kind = "invalid" if "step" in v else "valid"
        out.append((f"proof v3 {kind}: {v['name']}", v["text"].encode("utf-8"), keys, v.get("step")))
    return out


W1, W2 = (
    Cosigner.from_seed("witness.test/w1", bytes([1]) * 32),
    Cosigner.from_seed("witness.test/w2", bytes([2]) * 32),
)
POLICY = (f"w1={W1.verifier.to_string()}", f"w2={W2.verifier.to_string()}")
