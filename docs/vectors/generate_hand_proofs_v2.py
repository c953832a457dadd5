"""Writes docs/vectors/fairdeck-hand-proofs-v2.json: hand proofs of format 2 (docs/hand-proof.md),
whose receipts are C2SP tlog-proof texts, from the format-1 vectors of
docs/vectors/fairdeck-hand-proofs-v1.json.

    .venv/bin/python docs/vectors/generate_hand_proofs_v2.py

- ``valid``: each valid format-1 proof, written in format 2 (the same hand, entries, checkpoint);
- ``invalid``: each broken format-1 proof whose fault is not in the file's form, written in
  format 2 (its step unchanged), and format-2 files broken in their tlog-proof texts (step
  ``format``): a wrong header, no ``extra`` line, an index with a leading zero, a proof hash of
  31 bytes or in non-canonical base64, no empty line before the checkpoint, a receipt given as
  a format-1 object;
- ``tlog_proofs``: single tlog-proof texts and what a reader must make of them: the index, the
  tree size and the number of proof hashes, or refusal.

Deterministic (it only rewrites the format-1 vectors); tests/client/test_hand_proof_v2.py checks
that the file is what this writes, and runs every case.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "client")]

from fairdeck.core.errors import VerificationError  # noqa: E402
from fairdeck.log import tlog_proof  # noqa: E402
from fairdeck.log.handproof import HandProof  # noqa: E402

V1 = json.loads((HERE / "fairdeck-hand-proofs-v1.json").read_text())
OUT = HERE / "fairdeck-hand-proofs-v2.json"


def as_v2(text: str) -> str:
    return HandProof.from_json(text).as_format(2).to_json()


def main() -> None:
    valid = [{"name": c["name"], "text": as_v2(c["text"])} for c in V1["valid"]]
    invalid = []
    for case in V1["invalid"]:
        try:
            text = as_v2(case["text"])
        except VerificationError:
            continue  # a fault in the form of format 1: format 2 has its own below
        invalid.append({"name": case["name"], "step": case["step"], "text": text})
    base = valid[0]["text"]

    reveal = json.loads(base)["reveal"]
    first_hash = reveal.split("\n")[3]
    without_extra = "\n".join(line for line in reveal.split("\n") if not line.startswith("extra "))
    object_receipt = json.loads(V1["valid"][0]["text"])["commit"]
    edits: list[tuple[str, str, object]] = [
        ("a tlog-proof with another header", "commit", lambda t: t.replace("@v1", "@v2", 1)),
        ("a tlog-proof without its extra line", "reveal", lambda t: without_extra),
        ("an index with a leading zero", "reveal", lambda t: t.replace("\nindex ", "\nindex 0", 1)),
        ("a proof hash of 31 bytes", "reveal", lambda t: t.replace(first_hash, "A" * 40 + "AA==", 1)),
        ("a hash in non-canonical base64", "reveal", lambda t: t.replace(first_hash, first_hash[:-2] + "B=")),
        ("no empty line before the checkpoint", "commit", lambda t: t.replace("\n\n", "\n", 1)),
        ("a format-1 receipt object in format 2", "commit", lambda t: object_receipt),
    ]  # fmt: skip
    for name, which, edit in edits:
        d = json.loads(base)
        d[which] = edit(d[which])  # type: ignore[operator]
        invalid.append(
            {"name": name, "step": "format", "text": json.dumps(d, indent=2, ensure_ascii=False) + "\n"}
        )
    sample = json.loads(base)["reveal"]
    proof = tlog_proof.parse(sample)
    too_big = sample.replace(f"\nindex {proof.index}\n", "\nindex 18446744073709551616\n")
    tlog_proofs: list[dict[str, object]] = [
        {
            "name": "a receipt of the first valid proof",
            "text": sample,
            "index": proof.index,
            "tree_size": proof.tree_size,
            "hashes": len(proof.hashes),
        },
        {"name": "no header", "text": sample.split("\n", 1)[1], "error": True},
        {"name": "a second header", "text": tlog_proof.HEADER + "\n" + sample, "error": True},
        {"name": "an index beyond 2**64-1", "text": too_big, "error": True},
        {
            "name": "an extra line that is not base64",
            "text": sample.replace("\nextra ", "\nextra !", 1),
            "error": True,
        },
    ]
    data = {
        "version": "fairdeck-v1",
        "description": __doc__.split("\n\n", 1)[0],
        "spec": "https://c2sp.org/tlog-proof (C2SP main, commit ab17a74)",
        "log_key": V1["log_key"],
        "valid": valid,
        "invalid": invalid,
        "tlog_proofs": tlog_proofs,
    }
    # Written beside and renamed over: a test that reads the file while its check reruns this
    # (pytest-xdist runs them at once) sees the old bytes or the new, never a half-written file.
    part = OUT.with_name(OUT.name + ".part")
    part.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    os.replace(part, OUT)


if __name__ == "__main__":
    main()
