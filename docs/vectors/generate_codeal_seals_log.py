"""Generate fairdeck-codeal-seals-log-v1.json: the seals entry (type 7) of docs/log-format.md and
what the audit says of it.

    python docs/vectors/generate_codeal_seals_log.py           # (re)write the file
    python docs/vectors/generate_codeal_seals_log.py --check   # exit 1 if the file differs

Deterministic (every random byte is SHAKE-256 of a fixed label). The hand is the published one of
fairdeck-codeal-log-v1.json (short deck, two holders, positions 0 and 1): co-dealer 1 seals its
share of both positions to one seat key and signs the seal statements (codealing-spec section 9.1)
with a fixed identity key. Entries of that file are named as there; the seals entry is "seals".
Each audit case is a run of entries, the co-dealer keys the auditor pinned, and its answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.entries import SEALS, CodealEntry, decode_entry
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.log_audit import CodealLogAudit
from fairdeck.codeal.seal import seal_share
from fairdeck.codeal.seal_statement import sign_seal
from fairdeck.core.decks import DeckSpec

HERE = Path(__file__).resolve().parent
OUT = HERE / "fairdeck-codeal-seals-log-v1.json"
LOG = json.loads((HERE / "fairdeck-codeal-log-v1.json").read_text())
NAMED = {e["name"]: bytes.fromhex(e["entry"]) for e in LOG["entries"]}
TIME = 1_700_000_000_004
OPENING = ["setup", "shuffle/holder-0", "shuffle/holder-1", "shares/position-0", "shares/position-1"]


def shake(label: bytes, n: int = 32) -> bytes:
    return hashlib.shake_256(b"fairdeck-codeal-seals-log-v1 " + label).digest(n)


IDENTITY = Ed25519PrivateKey.from_private_bytes(shake(b"identity"))
IDENTITY_KEY = IDENTITY.public_key().public_bytes_raw()
SEAT_KEY = X25519PrivateKey.from_private_bytes(shake(b"seat")).public_key().public_bytes_raw()
OTHER_KEY = X25519PrivateKey.from_private_bytes(shake(b"other seat")).public_key().public_bytes_raw()


def _eph(p: int, n: int) -> bytes:
    """The sealing randomness of position ``p`` (its ephemeral X25519 key)."""
    return shake(b"eph %d" % p, n)


def _seals() -> CodealEntry:
    setup = decode_entry(NAMED["setup"])
    spec = DeckSpec.parse(setup.deck)
    keys = [KeyRecord.decode(r, k) for k, r in enumerate(setup.records)]
    ctx = HandContext(spec, setup.hand_id, tuple(r.key for r in keys), tuple(r.commitment for r in keys))
    records = []
    for p in (0, 1):
        share = decode_entry(NAMED[f"shares/position-{p}"]).records[1]
        sealed = seal_share(spec, setup.hand_id, p, 1, share, SEAT_KEY, functools.partial(_eph, p))
        s = sign_seal(IDENTITY, ctx, p, 1, SEAT_KEY, sealed)
        records.append(p.to_bytes(4, "big") + s.seat_key + s.sealed_sha256 + s.signature)
    return CodealEntry(SEALS, TIME, setup.hand_id, records=tuple(records), position=1)


SEALED = _seals()
NAMED["seals"] = SEALED.encode()


def _with(records: list[bytes], holder: int = 1, time_ms: int = TIME) -> bytes:
    return CodealEntry(SEALS, time_ms, SEALED.hand_id, records=tuple(records), position=holder).encode()


def _flip(record: bytes, at: int) -> bytes:
    return record[:at] + bytes([record[at] ^ 1]) + record[at + 1 :]


R0, R1 = SEALED.records
BAD_SIGNATURE = _with([R0, _flip(R1, 4 + 64 + 10)])
OTHER_SEAT = _with([R0, R1[:4] + OTHER_KEY + R1[36:]])
BAD_DIGEST = _with([_flip(R0, 4 + 32), R1])
DESCENDING = _with([R1, R0])
TWICE = _with([R0, R0])
UNDEALT = _with([R0, R1, (5).to_bytes(4, "big") + R1[4:]])
ONLY_ONE = _with([R0])
HOLDER_2 = _with([R0, R1], holder=2)
LATER = _with([R0, R1], time_ms=TIME + 1000)
KEY = IDENTITY_KEY.hex()
CASES: list[tuple[str, list[str | bytes], list[str]]] = [
    ("a closed hand with its seals, keys pinned", [*OPENING, "seals", "seeds"], [KEY]),
    ("a closed hand with its seals, no keys", [*OPENING, "seals", "seeds"], []),
    ("a closed hand without seals (closed before they were logged)", [*OPENING, "seeds"], [KEY]),
    ("a signature altered, keys pinned", [*OPENING, BAD_SIGNATURE, "seeds"], [KEY]),
    ("a signature altered, no keys", [*OPENING, BAD_SIGNATURE, "seeds"], []),
    ("a statement naming another seat key, keys pinned", [*OPENING, OTHER_SEAT, "seeds"], [KEY]),
    ("a digest altered, keys pinned", [*OPENING, BAD_DIGEST, "seeds"], [KEY]),
    ("positions descending", [*OPENING, DESCENDING, "seeds"], []),
    ("a position twice", [*OPENING, TWICE, "seeds"], []),
    ("a position no shares entry deals", [*OPENING, UNDEALT, "seeds"], []),
    ("a seals entry of co-dealer 2 of a hand of two holders", [*OPENING, HOLDER_2, "seeds"], []),
    ("two different seals entries", [*OPENING, "seals", ONLY_ONE, "seeds"], []),
    ("the seals logged again by a retry", [*OPENING, "seals", LATER, "seeds"], [KEY]),
    ("a shares entry after the seals", [*OPENING[:4], ONLY_ONE, OPENING[4], "seeds"], []),
    ("a seals entry after the seeds", [*OPENING, "seeds", "seals"], []),
    ("a seals entry before the shuffles", ["setup", "seals", *OPENING[1:], "seeds"], []),
    ("as many keys pinned as holders: not checked", [*OPENING, BAD_SIGNATURE, "seeds"], [KEY, KEY]),
]


def answer(entries: list[bytes], keys: list[str]) -> dict[str, Any]:
    audit = CodealLogAudit(codealer_keys=tuple(bytes.fromhex(k) for k in keys))
    found = [f for i, e in enumerate(entries) for f in audit.add(i, e)[1]] + audit.finish()
    return {
        "findings": [{"index": i, "hand_id": h, "problem": p} for i, h, p in found],
        "verified": audit.verified,
        "open": audit.open,
        "repeated": audit.repeated,
        "seals_verified": audit.seals_verified,
        "unsealed": audit.unsealed,
    }


def build() -> dict[str, Any]:
    seals = NAMED["seals"]
    head = seals[: len(seals) - 8 - 2 * len(R0)]  # through lp(hand_id)
    invalid = [
        ("holder 0", head + (0).to_bytes(4, "big") + seals[len(head) + 4 :], "a co-dealer is holder 1 to 15"),
        (
            "holder 16",
            head + (16).to_bytes(4, "big") + seals[len(head) + 4 :],
            "a co-dealer is holder 1 to 15",
        ),
        (
            "m of 3 with 2 seals",
            _with([R0, R1])[: len(head) + 4] + (3).to_bytes(4, "big") + R0 + R1,
            "m x 132 bytes",
        ),
        ("trailing byte", seals + b"\x00", "bytes after the last seal"),
        ("truncated", seals[:-1], "a seal runs past the end"),
        ("no m", head + (1).to_bytes(4, "big"), "m runs past the end"),
    ]
    cases = []
    for name, items, keys in CASES:
        entries = [NAMED[i] if isinstance(i, str) else i for i in items]
        shown = [i if isinstance(i, str) else {"hex": i.hex()} for i in items]
        cases.append({"name": name, "entries": shown, "codealer_keys": keys, **answer(entries, keys)})
    return {
        "version": "fairdeck-codeal-seals-log-v1",
        "description": "The seals entry (type 7) of docs/log-format.md and the audit of it, generated "
        "by docs/vectors/generate_codeal_seals_log.py. Entries are named as in "
        'fairdeck-codeal-log-v1.json\'s "entries", "seals" (below), or {"hex": ...}. Never edit by hand.',
        "identity_key": IDENTITY_KEY.hex(),
        "seat_key": SEAT_KEY.hex(),
        "entries": [
            {
                "name": "seals",
                "type": SEALS,
                "time_ms": SEALED.time_ms,
                "hand_id": SEALED.hand_id,
                "holder": 1,
                "seals": [
                    {"position": p, "seat_key": k.hex(), "sealed_sha256": d.hex(), "signature": g.hex()}
                    for p, k, d, g in SEALED.seals()
                ],
                "entry": seals.hex(),
            }
        ],
        "invalid_entries": [{"name": n, "entry": b.hex(), "why": w} for n, b, w in invalid],
        "audit_cases": cases,
    }


def main() -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        return 0 if OUT.read_text() == text else 1
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
