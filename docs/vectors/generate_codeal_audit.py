"""Generate fairdeck-codeal-audit-v1.json: what the audit says of a log's co-dealt entries.

    python docs/vectors/generate_codeal_audit.py           # (re)write the file
    python docs/vectors/generate_codeal_audit.py --check   # exit 1 if the file differs

Each case is a run of co-dealt entries, in log order from index 0, and the audit's answer
(docs/log-format.md, "The audit", check 3; fairdeck.codeal.log_audit): its findings as
(index, hand id, problem), then the hands verified and still open, and the entries repeated.
Entries are named from the published fairdeck-codeal-log-v1.json (one short-deck hand, two
holders, positions 0 and 1), or given in hex where a case alters one; those vectors never change,
so neither do these.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fairdeck.codeal.entries import SEEDS, SHARES, CodealEntry, decode_entry
from fairdeck.codeal.log_audit import CodealLogAudit

HERE = Path(__file__).resolve().parent
OUT = HERE / "fairdeck-codeal-audit-v1.json"
LOG = json.loads((HERE / "fairdeck-codeal-log-v1.json").read_text())
NAMED = {e["name"]: bytes.fromhex(e["entry"]) for e in LOG["entries"]}
SETUP, S0, S1, P0, P1, SEED = (
    "setup",
    "shuffle/holder-0",
    "shuffle/holder-1",
    "shares/position-0",
    "shares/position-1",
    "seeds",
)
HAND = [SETUP, S0, S1, P0, P1, SEED]


def _altered_share() -> bytes:
    """Position 1's shares entry with holder 1's z changed in its low bit (still a reduced scalar)."""
    e = decode_entry(NAMED[P1])
    theirs = bytearray(e.records[1])
    theirs[96] ^= 1
    records = (e.records[0], bytes(theirs))
    return CodealEntry(SHARES, e.time_ms, e.hand_id, records=records, position=1).encode()


def _altered_seed() -> bytes:
    """The seeds entry with holder 0's seed changed in its first bit."""
    e = decode_entry(NAMED[SEED])
    seed = bytearray(e.records[0])
    seed[0] ^= 1
    return CodealEntry(SEEDS, e.time_ms, e.hand_id, records=(bytes(seed), *e.records[1:])).encode()


def _later(name: str) -> bytes:
    """Entry ``name`` logged again a second later: a retry after a crash between an append and
    the dealer noting it (the same bytes but for time_ms)."""
    e = decode_entry(NAMED[name])
    return CodealEntry(e.kind, e.time_ms + 1000, e.hand_id, e.deck, e.records, e.position).encode()


def _other_setup() -> bytes:
    """The setup entry with holder 1's key record's first byte changed: another hand's keys."""
    e = decode_entry(NAMED[SETUP])
    record = bytearray(e.records[1])
    record[0] ^= 1
    return CodealEntry(
        e.kind, e.time_ms, e.hand_id, e.deck, (e.records[0], bytes(record)), e.position
    ).encode()


def _stray() -> bytes:
    return CodealEntry(SEEDS, 1, "no-such-hand", records=(bytes(32), bytes(32))).encode()


CASES: list[tuple[str, list[str | bytes]]] = [
    ("a closed hand, in order", HAND),
    ("a hand still open", [SETUP, S0, S1]),
    ("an open hand closed with nothing dealt", [SETUP, S0, S1, SEED]),
    ("a shuffle entry dropped", [SETUP, S0, P0, P1, SEED]),
    ("a shuffle entry dropped from a hand still open", [SETUP, S0]),
    ("shuffles in the wrong holder order", [SETUP, S1, S0, P0, P1, SEED]),
    ("a share altered", [SETUP, S0, S1, P0, _altered_share(), SEED]),
    ("a seed altered", [SETUP, S0, S1, P0, P1, _altered_seed()]),
    ("positions out of order", [SETUP, S0, S1, P1, P0, SEED]),
    ("a shares entry after the seeds", [SETUP, S0, S1, P0, SEED, P1]),
    ("a shares entry before the shuffles", [SETUP, S0, P0, S1, P1, SEED]),
    ("the setup twice", [SETUP, S0, S1, SETUP]),
    ("the setup twice, the second another hand's", [SETUP, S0, S1, _other_setup()]),
    (
        "the opening logged again by a retry",
        [SETUP, S0, S1, _later(SETUP), _later(S0), _later(S1), P0, P1, SEED],
    ),
    ("the closing logged again by a retry", [*HAND, _later(P0), _later(P1), _later(SEED)]),
    ("a shuffle logged again after the seeds", [*HAND, _later(S1)]),
    ("an entry of no hand", [_stray(), *HAND]),
    ("an entry that does not parse", [NAMED[SETUP] + b"\x00", *HAND]),
]


def answer(entries: list[bytes]) -> dict[str, Any]:
    audit = CodealLogAudit()
    found = [f for i, e in enumerate(entries) for f in audit.add(i, e)[1]] + audit.finish()
    return {
        "findings": [{"index": i, "hand_id": h, "problem": p} for i, h, p in found],
        "verified": audit.verified,
        "open": audit.open,
        "repeated": audit.repeated,
    }


def build() -> dict[str, Any]:
    cases = []
    for name, items in CASES:
        entries = [NAMED[i] if isinstance(i, str) else i for i in items]
        shown = [i if isinstance(i, str) else {"hex": i.hex()} for i in items]
        cases.append({"name": name, "entries": shown, **answer(entries)})
    return {
        "version": "fairdeck-codeal-audit-v1",
        "description": "What the audit says of runs of co-dealt log entries (docs/log-format.md, "
        '"The audit"), generated by docs/vectors/generate_codeal_audit.py. An entry is the name of '
        'one in fairdeck-codeal-log-v1.json\'s "entries", or {"hex": ...}. Never edit by hand.',
        "cases": cases,
    }


def main() -> int:
    text = json.dumps(build(), indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        return 0 if OUT.read_text() == text else 1
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
