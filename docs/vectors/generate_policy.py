"""Writes docs/vectors/fairdeck-tlog-policy-v1.json: C2SP tlog-policy files and what a verifier must
decide about each, written from the text (https://c2sp.org/tlog-policy), not from our parser.

    .venv/bin/python docs/vectors/generate_policy.py

- ``valid``: a policy file, the witnesses it names, and for sets of witnesses that cosigned,
  whether the quorum is met. The spec's own example (two groups of three) is one of them.
- ``invalid``: a policy file that must be refused, and the 1-based line to blame (0: the file
  as a whole, such as a missing quorum line).
- ``checkpoints``: one valid policy, and checkpoint notes with the cosignatures of some of its
  witnesses (one line broken): which witnesses validly cosigned, and whether the quorum is met.

Keys come from fixed seeds, so the file is the same every run; tests/log/test_policy.py checks
that it is, and runs every case.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "client")]

from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint  # noqa: E402
from fairdeck.log.cosignature import Cosigner  # noqa: E402
from fairdeck.log.note import Signer  # noqa: E402

OUT = HERE / "fairdeck-tlog-policy-v1.json"


def seed(label: str) -> bytes:
    return hashlib.sha256(b"fairdeck tlog-policy vectors " + label.encode()).digest()


def witness(name: str) -> Cosigner:
    return Cosigner.from_seed(f"witness.example/{name}", seed(name))


LOG_SIGNER = Signer.from_seed("example.com/fairdeck", seed("log"))
LOG_VKEY = LOG_SIGNER.verifier.to_string()
W = {n: witness(n) for n in ("X1", "X2", "X3", "Y1", "Y2", "Y3")}
V = {n: w.verifier.to_string() for n, w in W.items()}
ML_DSA_44_VKEY = "witness.example/pq+00000000+" + base64.b64encode(bytes([0x06]) + bytes(1312)).decode()


def subsets(names: list[str]) -> list[list[str]]:
    return [list(c) for r in range(len(names) + 1) for c in itertools.combinations(names, r)]


def met_spec_example(signed: set[str]) -> bool:
    """The example's quorum, from its prose: at least two X witnesses and at least one Y witness."""
    return len(signed & {"X1", "X2", "X3"}) >= 2 and len(signed & {"Y1", "Y2", "Y3"}) >= 1


def valid_cases() -> list[dict[str, object]]:
    example = (
        f"log {LOG_VKEY}\n\n"
        f"witness X1 {V['X1']}\nwitness X2 {V['X2']}\nwitness X3 {V['X3']}\n"
        "group X-witnesses 2 X1 X2 X3\n\n"
        f"witness Y1 {V['Y1']}\nwitness Y2 {V['Y2']}\nwitness Y3 {V['Y3']}\n"
        "group Y-witnesses any Y1 Y2 Y3\n\n"
        "group X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y\n"
    )
    six = ["X1", "X2", "X3", "Y1", "Y2", "Y3"]
    cases: list[dict[str, object]] = [
        {
            "name": "the spec's example: two of X and one of Y",
            "policy": example,
            "witnesses": six,
            "decisions": [{"signed": s, "met": met_spec_example(set(s))} for s in subsets(six)],
        },
        {
            "name": "one witness is the quorum",
            "policy": f"witness X1 {V['X1']}\nquorum X1\n",
            "witnesses": ["X1"],
            "decisions": [{"signed": [], "met": False}, {"signed": ["X1"], "met": True}],
        },
        {
            "name": "quorum none needs no witness",
            "policy": f"log {LOG_VKEY}\nquorum none\n",
            "witnesses": [],
            "decisions": [{"signed": [], "met": True}],
        },
        {
            "name": "comments, blank lines, tabs, leading and trailing whitespace, URLs, non-ASCII",
            "policy": (
                "# a policy for fairdeck's log \u2014 with a comment in UTF-8\n"
                "   \n"
                f"\tlog\t{LOG_VKEY}\thttps://example.com/fairdeck/  \n"
                f"  witness  X1 {V['X1']} https://x1.example/  \n"
                f"witness \u00c5ngstr\u00f6m {V['X2']}\n"
                "\t# an indented comment\n"
                "group g 2 X1 \u00c5ngstr\u00f6m\n"
                "quorum g"
            ),
            "witnesses": ["X1", "\u00c5ngstr\u00f6m"],
            "decisions": [{"signed": s, "met": len(s) == 2} for s in subsets(["X1", "\u00c5ngstr\u00f6m"])],
        },
        {
            "name": "k of n, nested",
            "policy": (
                f"witness X1 {V['X1']}\nwitness X2 {V['X2']}\nwitness X3 {V['X3']}\nwitness Y1 {V['Y1']}\n"
                "group three 3 X1 X2 X3\ngroup either any three Y1\nquorum either\n"
            ),
            "witnesses": ["X1", "X2", "X3", "Y1"],
            "decisions": [
                {"signed": s, "met": "Y1" in s or {"X1", "X2", "X3"} <= set(s)}
                for s in subsets(["X1", "X2", "X3", "Y1"])
            ],
        },
    ]
    return cases


def invalid_cases() -> list[dict[str, object]]:
    w = f"witness X1 {V['X1']}\n"
    return [
        {"name": "no quorum line", "policy": w, "line": 0},
        {"name": "two quorum lines", "policy": w + "quorum X1\nquorum X1\n", "line": 3},
        {"name": "an unknown keyword", "policy": w + "threshold 1\nquorum X1\n", "line": 2},
        {"name": "a quorum naming what is not defined", "policy": w + "quorum X2\n", "line": 2},
        {"name": "a forward reference", "policy": "group g any X1\n" + w + "quorum g\n", "line": 1},
        {"name": "a member listed twice", "policy": w + "group g any X1 X1\nquorum g\n", "line": 2},
        {"name": "a group without members", "policy": w + "group g any\nquorum g\n", "line": 2},
        {"name": "k of 0", "policy": w + "group g 0 X1\nquorum g\n", "line": 2},
        {"name": "k above n", "policy": w + "group g 2 X1\nquorum g\n", "line": 2},
        {"name": "k with a leading zero", "policy": w + "group g 01 X1\nquorum g\n", "line": 2},
        {"name": "a name defined twice", "policy": w + f"witness X1 {V['X2']}\nquorum X1\n", "line": 2},
        {"name": "two witnesses with one key", "policy": w + f"witness X2 {V['X1']}\nquorum X1\n", "line": 2},
        {"name": "none as a witness name", "policy": f"witness none {V['X1']}\nquorum none\n", "line": 1},
        {"name": "none as a group member", "policy": w + "group g any X1 none\nquorum g\n", "line": 2},
        {"name": "a log listed twice", "policy": f"log {LOG_VKEY}\nlog {LOG_VKEY}\nquorum none\n", "line": 2},
        {"name": "a log key as a witness key", "policy": f"witness L {LOG_VKEY}\nquorum L\n", "line": 1},
        {"name": "a witness key as a log key", "policy": f"log {V['X1']}\nquorum none\n", "line": 1},
        {"name": "a control octet", "policy": w + "quorum X1\r\n", "line": 2},
        {"name": "a witness line without a key", "policy": "witness X1\nquorum X1\n", "line": 1},
        {
            "name": "an ML-DSA-44 witness key (tlog-cosignature v1.1.0-rc.1): not checked by this verifier",
            "policy": f"witness pq {ML_DSA_44_VKEY}\nquorum pq\n",
            "line": 1,
        },
    ]


def checkpoint_cases() -> dict[str, object]:
    policy = (
        f"witness X1 {V['X1']}\nwitness X2 {V['X2']}\nwitness Y1 {V['Y1']}\n"
        "group X 2 X1 X2\ngroup XY all X Y1\nquorum XY\n"
    )
    text = Checkpoint("example.com/fairdeck", 7, hashlib.sha256(b"root").digest()).to_text()
    note = sign_checkpoint(Checkpoint.parse(text), LOG_SIGNER).decode()
    line = {n: W[n].cosign(text, 1_700_000_000) for n in ("X1", "X2", "Y1", "X3")}
    cases = []
    for signers in (["X1", "X2", "Y1"], ["X1", "Y1"], ["X1", "X2"], ["X1", "X2", "Y1", "X3"], []):
        cases.append(
            {
                "note": note + "".join(line[n] for n in signers),
                "signed": [n for n in ("X1", "X2", "Y1") if n in signers],
                "met": {"X1", "X2", "Y1"} <= set(signers),
            }
        )
    raw = bytearray(base64.b64decode(line["Y1"].split(" ")[2]))
    raw[-1] ^= 1
    bad = line["Y1"].rsplit(" ", 1)[0] + " " + base64.b64encode(bytes(raw)).decode() + "\n"
    cases.append({"note": note + line["X1"] + line["X2"] + bad, "error": "invalid cosignature by witness Y1"})
    return {"policy": policy, "log_vkey": LOG_VKEY, "cases": cases}


def main() -> None:
    data = {
        "version": 1,
        "description": __doc__.split("\n\n", 1)[0],
        "spec": "https://c2sp.org/tlog-policy (C2SP main, commit 1896a5a)",
        "valid": valid_cases(),
        "invalid": invalid_cases(),
        "checkpoints": checkpoint_cases(),
    }
    # Written beside and renamed over: a test that reads the file while its check reruns this
    # (pytest-xdist runs them at once) sees the old bytes or the new, never a half-written file.
    part = OUT.with_name(OUT.name + ".part")
    part.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    os.replace(part, OUT)


if __name__ == "__main__":
    main()
