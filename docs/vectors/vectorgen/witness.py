"""fairdeck-witness-v1.json, the known answers of docs/witness.md: cosignature/v1 lines valid
and not (C2SP tlog-cosignature), witness policies, and the answers tlog-witness's
add-checkpoint requires to a sequence of requests, written from the text, not from our
witness.
"""

from __future__ import annotations

import base64
from typing import Any

from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.cosignature import Cosigner, WitnessPolicy, add_cosignatures, signed_message
from fairdeck.log.note import Signer, sign_note

from .hands import VERSION, label_bytes
from .tree import Tree, b64


def witness_vectors() -> dict[str, Any]:
    """Known answers of docs/witness.md: cosignature/v1 lines, policies, and add-checkpoint answers."""
    log_signer = Signer.from_seed("example.com/fairdeck-witnessed", label_bytes("witness/log key", 32))
    w1 = Cosigner.from_seed("witness.example/w1", label_bytes("witness/w1", 32))
    w2 = Cosigner.from_seed("witness.example/w2", label_bytes("witness/w2", 32))
    stranger = Cosigner.from_seed("witness.example/w1", label_bytes("witness/another w1 key", 32))
    tree, fork = Tree(12), Tree(12, b"a forked entry")
    time = 1_700_000_000
    text = Checkpoint(log_signer.name, 7, tree.root(7)).to_text()

    def key(c: Cosigner) -> dict[str, Any]:
        return {
            "name": c.name,
            "seed": c.seed.hex(),
            "vkey": c.verifier.to_string(),
            "key_id": f"{c.verifier.key_id:08x}",
        }

    cosignatures = [
        {
            "name": f"{c.name} at {t}",
            "vkey": c.verifier.to_string(),
            "checkpoint": text,
            "timestamp": t,
            "signed_message": b64(signed_message(text, t)),
            "line": c.cosign(text, t),
        }
        for c, t in [(w1, time), (w2, time), (w1, 1)]
    ]
    good = w1.cosign(text, time)
    raw = base64.b64decode(good.split()[-1])

    def relined(data: bytes) -> str:
        return f"\u2014 {w1.name} {b64(data)}\n"

    broken = [
        ("another timestamp", relined(raw[:4] + (time + 1).to_bytes(8, "big") + raw[12:]), "invalid"),
        ("a flipped signature bit", relined(raw[:12] + bytes([raw[12] ^ 1]) + raw[13:]), "invalid"),
        ("another checkpoint's signature", w1.cosign(text.replace("\n7\n", "\n8\n"), time), "invalid"),
        ("a timestamp above 2**63-1", relined(raw[:4] + (2**63).to_bytes(8, "big") + raw[12:]), "malformed"),
        ("a truncated line", relined(raw[:-1]), "malformed"),
        ("another key ID", relined(bytes(4) + raw[4:]), "malformed"),
    ]
    invalid = [
        {
            "name": name,
            "vkey": w1.verifier.to_string(),
            "checkpoint": text,
            "line": line,
            "expected": expected,
        }
        for name, line, expected in broken
    ]
    note = sign_note(text, log_signer)
    witnesses = {"w1": w1.verifier.to_string(), "w2": w2.verifier.to_string()}
    policy = WitnessPolicy.parse([f"{k}={v}" for k, v in witnesses.items()], 2)
    policy_cases = []
    for name, lines, threshold in [
        ("both witnesses", [good, w2.cosign(text, time)], 2),
        ("one of two, 2 needed", [good], 2),
        ("one of two, 1 needed", [good], 1),
        ("the same witness twice", [good, w1.cosign(text, time + 5)], 2),
        ("an unknown key with a known name", [stranger.cosign(text, time), w2.cosign(text, time)], 2),
        ("a bad cosignature by a known witness", [broken[1][1], w2.cosign(text, time)], 1),
    ]:
        cosigned = add_cosignatures(note, lines).decode("utf-8")
        case: dict[str, Any] = {
            "name": name,
            "note": cosigned,
            "witnesses": witnesses,
            "threshold": threshold,
        }
        try:
            result = WitnessPolicy(policy.witnesses, threshold).check(cosigned.encode("utf-8"))
        except Exception:
            case["expected"] = "bad cosignature"
        else:
            case.update(ok=result.ok, signed=list(result.signed), missing=list(result.missing))
        policy_cases.append(case)

    # One witness (w1), fresh state, the clock at `time`: each request in order, and the answer
    # tlog-witness ("add-checkpoint") requires, written here from the text, not from our witness.
    def cosigned(size: int) -> str:
        return w1.cosign(Checkpoint(log_signer.name, size, tree.root(size)).to_text(), time)

    other_key = Signer.from_seed(log_signer.name, bytes(32))
    requests: list[tuple[str, bytes, int, str | None]] = [
        ("a proof from 0 that is not empty", tree.body(0, 5, log_signer, [bytes(32)]), 422, None),
        ("first checkpoint, from 0", tree.body(0, 5, log_signer), 200, cosigned(5)),
        ("a stale old size", tree.body(0, 9, log_signer), 409, "5\n"),
        ("growth with a consistency proof", tree.body(5, 9, log_signer), 200, cosigned(9)),
        ("the same checkpoint again", tree.body(9, 9, log_signer), 200, cosigned(9)),
        ("a fork of the same size", fork.body(9, 9, log_signer), 422, None),
        ("a forked extension", fork.body(9, 12, log_signer), 422, None),
        ("a wrong proof", tree.body(9, 12, log_signer, [bytes(32)] * 2), 422, None),
        ("old size above the checkpoint", tree.body(10, 9, log_signer, []), 400, None),
        ("an unknown origin", tree.body(0, 5, Signer.from_seed("other.example/log", bytes(32))), 404, None),
        ("a signature by another key", tree.body(9, 12, other_key), 403, None),
        ("no old line", b"5\n\n" + tree.body(0, 5, log_signer).split(b"\n\n", 1)[1], 400, None),
        ("growth to 12", tree.body(9, 12, log_signer), 200, cosigned(12)),
    ]
    return {
        "version": VERSION,
        "description": (
            "Known-answer vectors of docs/witness.md (C2SP tlog-cosignature cosignature/v1 and "
            "tlog-witness add-checkpoint), generated by docs/vectors/generate.py. Never edit by hand."
        ),
        "log_vkey": log_signer.verifier.to_string(),
        "witnesses": [key(w1), key(w2)],
        "cosignatures": cosignatures,
        "invalid_cosignatures": invalid,
        "policies": policy_cases,
        "add_checkpoint": {
            "witness": "witness.example/w1",
            "time": time,
            "requests": [
                {"name": name, "body": b64(body), "status": status, "answer": answer}
                for name, body, status, answer in requests
            ],
        },
    }
