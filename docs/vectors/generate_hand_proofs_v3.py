"""Writes docs/vectors/fairdeck-hand-proofs-v3.json: hand proofs of format 3 (docs/hand-proof.md),
which carry the log key rotation statements that lead to the checkpoint's key, made from the
format-1 vectors of docs/vectors/fairdeck-hand-proofs-v1.json.

    .venv/bin/python docs/vectors/generate_hand_proofs_v3.py

The log of the format-1 vectors (key 1, their ``log_key``) was rotated twice: key 1 to key 2, and
key 2 to key 3, each by a statement signed by both keys (docs/log-format.md, "Key rotation"). Its
checkpoint is signed again by key 3. Each case names the keys a player gives (``keys``, by name
in ``keys``): the player may hold any key of the chain, or several.

- ``valid``: proofs that verify under the keys given, the statements followed from old to new;
- ``invalid``: proofs that fail at ``step``: statements that are forged, out of order, cut, of
  another log, or not statements, a chain that does not lead to the checkpoint's key (step
  ``rotations``); a chain valid in itself that does not start from a key given (``checkpoint``);
  the form of format 3 (``format``); and a fault before the statements (``commitment``).

Deterministic (the keys come from fixed labels, Ed25519 signs deterministically);
tests/client/test_hand_proof_v3.py checks that the file is what this writes, and runs every case.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "client"), str(HERE)]

from vectorgen.hands import label_bytes  # noqa: E402

from fairdeck.log.checkpoint import open_checkpoint, sign_checkpoint  # noqa: E402
from fairdeck.log.handproof import HandProof  # noqa: E402
from fairdeck.log.note import Signer, Verifier, sign_note  # noqa: E402
from fairdeck.log.rotation import MAX_CHAIN, rotation_text, sign_rotation  # noqa: E402

V1 = json.loads((HERE / "fairdeck-hand-proofs-v1.json").read_text())
OUT = HERE / "fairdeck-hand-proofs-v3.json"
ORIGIN = Verifier.parse(V1["log_key"]).name


def signer(label: str, origin: str = ORIGIN) -> Signer:
    return Signer.from_seed(origin, hashlib.sha256(f"fairdeck hand proofs v3/{label}".encode()).digest())


def main() -> None:
    k2, k3, forger, forger2 = signer("key 2"), signer("key 3"), signer("forger"), signer("forger 2")
    other1, other2 = (
        signer("other log 1", "example.com/another-log"),
        signer("other log 2", "example.com/another-log"),
    )
    key1 = Verifier.parse(V1["log_key"])
    proofs = [HandProof.from_json(c["text"]) for c in V1["valid"]]
    checkpoint = open_checkpoint(proofs[0].reveal.signed_checkpoint, key1, ORIGIN)
    # Key 1's signer is not in the v1 file (only its verifier): its statement is made from the
    # label the v1 generator uses, and checked against the verifier the v1 vectors publish.
    k1 = Signer.from_seed(ORIGIN, label_bytes("handproof/log key", 32))
    assert k1.verifier == key1, "key 1 is not the format-1 vectors' log key"
    s12, s23 = sign_rotation(k1, k2), sign_rotation(k2, k3)
    by3 = sign_checkpoint(checkpoint, k3)
    by2 = sign_checkpoint(checkpoint, k2)
    by_forger = sign_checkpoint(checkpoint, forger2)
    keys = {
        "key 1": k1.verifier.to_string(),
        "key 2": k2.verifier.to_string(),
        "key 3": k3.verifier.to_string(),
        "a key of no statement": forger.verifier.to_string(),
    }

    def v3(p: HandProof, statements: list[bytes], note: bytes = by3) -> HandProof:
        commit = dataclasses.replace(p.commit, signed_checkpoint=note)
        reveal = dataclasses.replace(p.reveal, signed_checkpoint=note)
        return dataclasses.replace(p, commit=commit, reveal=reveal, format=3, key_rotations=tuple(statements))

    def text(p: HandProof) -> str:
        return p.to_json()

    def edited(p: HandProof, change: Callable[[dict[str, Any]], object]) -> str:
        d = p.to_dict()
        change(d)
        return json.dumps(d, indent=2, ensure_ascii=False) + "\n"

    std, shoe = proofs[0], proofs[3]
    chain = v3(std, [s12, s23])
    valid = [
        {"name": "both statements, checked with key 1", "keys": ["key 1"], "text": text(chain)},
        {"name": "both statements, checked with key 2", "keys": ["key 2"], "text": text(chain)},
        {"name": "both statements, checked with key 3, which signed", "keys": ["key 3"], "text": text(chain)},
        {"name": "both statements, checked with keys 3 and 1", "keys": ["key 3", "key 1"],
         "text": text(chain)},
        {"name": "a shoe-8 hand, checked with key 1", "keys": ["key 1"], "text": text(v3(shoe, [s12, s23]))},
        {"name": "signed by key 2, one statement, checked with key 1", "keys": ["key 1"],
         "text": text(v3(std, [s12], by2))},
        {"name": "no statement, signed by key 1", "keys": ["key 1"],
         "text": text(v3(std, [], std.reveal.signed_checkpoint))},
    ]  # fmt: skip

    only_old = sign_note(rotation_text(k2.verifier, k3.verifier), k2)
    only_new = sign_note(rotation_text(k2.verifier, k3.verifier), k3)
    # A forger's statement from key 2 to its own key: its own signature under key 2's name and ID.
    forged_text = rotation_text(k2.verifier, forger.verifier)
    own = sign_note(forged_text, forger).decode()
    line = own.split("\n\n", 1)[1].split("\n")[0]
    fake_sig = forger.sign(forged_text.encode())
    fake_line = f"\u2014 {ORIGIN} " + base64.b64encode(k2.key_id.to_bytes(4, "big") + fake_sig).decode()
    forged = f"{forged_text}\n{fake_line}\n{line}\n".encode()
    changed = s23.replace(k3.verifier.to_string().encode(), forger.verifier.to_string().encode(), 1)
    to_itself = sign_note(rotation_text(k2.verifier, k2.verifier), k2)
    invalid = [
        {"name": "statements out of order", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [s23, s12]))},
        {"name": "the statement from key 2 to key 3 left out", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [s12]))},
        {"name": "a statement signed by the old key alone", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [s12, only_old]))},
        {"name": "a statement signed by the new key alone", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [s12, only_new]))},
        {"name": "a forger's statement from key 2, with a signature under key 2's name", "step": "rotations",
         "keys": ["key 1"], "text": text(v3(std, [s12, forged], sign_checkpoint(checkpoint, forger)))},
        {"name": "a statement whose new key was changed after signing", "step": "rotations",
         "keys": ["key 1"],
         "text": text(v3(std, [s12, changed], sign_checkpoint(checkpoint, forger)))},
        {"name": "a statement from a key to itself", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [s12, to_itself], by2))},
        {"name": "the genuine statements, the checkpoint signed by a forger", "step": "rotations",
         "keys": ["key 1"], "text": text(v3(std, [s12, s23], by_forger))},
        {"name": "a statement of another log", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [s12, s23, sign_rotation(other1, other2)]))},
        {"name": "a checkpoint given as a statement", "step": "rotations", "keys": ["key 1"],
         "text": text(v3(std, [by3]))},
        {"name": "a statement in base64, as the key-rotations file holds it", "step": "rotations",
         "keys": ["key 1"], "text": text(v3(std, [base64.b64encode(s12), s23]))},
        {"name": "a forger's own valid statement, checked with key 1", "step": "checkpoint",
         "keys": ["key 1"],
         "text": text(v3(std, [sign_rotation(forger, forger2)], by_forger))},
        {"name": "the statement from key 2 alone, checked with key 1", "step": "checkpoint",
         "keys": ["key 1"],
         "text": text(v3(std, [s23]))},
        {"name": "both statements, checked with a key of no statement", "step": "checkpoint",
         "keys": ["a key of no statement"], "text": text(chain)},
        {"name": "a server seed that does not open the commitment, with a bad statement",
         "step": "commitment",
         "keys": ["key 1"], "text": edited(v3(std, [s12, only_old]), lambda d: d["transcript"].update(
             server_seed="00" + d["transcript"]["server_seed"][2:]))},
        {"name": "key_rotations in format 2", "step": "format", "keys": ["key 1"],
         "text": edited(chain, lambda d: d.update(format=2))},
        {"name": "format 3 without key_rotations", "step": "format", "keys": ["key 1"],
         "text": edited(chain, lambda d: d.pop("key_rotations"))},
        {"name": "key_rotations as one string", "step": "format", "keys": ["key 1"],
         "text": edited(chain, lambda d: d.update(key_rotations=s12.decode()))},
        {"name": "a statement that is not a string", "step": "format", "keys": ["key 1"],
         "text": edited(chain, lambda d: d.update(key_rotations=[1, s23.decode()]))},
        {"name": f"{MAX_CHAIN + 1} statements", "step": "format", "keys": ["key 1"],
         "text": edited(chain, lambda d: d.update(key_rotations=[s12.decode()] * (MAX_CHAIN + 1)))},
        {"name": "format-1 receipt objects in format 3", "step": "format", "keys": ["key 1"],
         "text": edited(chain, lambda d: d.update(commit=json.loads(std.commit.to_json())))},
    ]  # fmt: skip
    data = {
        "version": "fairdeck-v1",
        "description": __doc__.split("\n\n", 1)[0],
        "keys": keys,
        "valid": valid,
        "invalid": invalid,
    }
    # Written beside and renamed over: a test that reads the file while its check reruns this
    # (pytest-xdist runs them at once) sees the old bytes or the new, never a half-written file.
    part = OUT.with_name(OUT.name + ".part")
    part.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    os.replace(part, OUT)


if __name__ == "__main__":
    main()
