"""Generate fairdeck-audit-v1.json: the vectors of docs/log-format.md's overdue rule and key rotation.

Run from the repository root, with fairdeck installed:

    python docs/vectors/generate_audit.py           # (re)write docs/vectors/fairdeck-audit-v1.json
    python docs/vectors/generate_audit.py --check   # exit 1 if the file differs from what this produces

Deterministic: every seed and key is SHA-256 of a fixed label. ``overdue`` holds small logs of real
hands (each reveal opens its commitment and digests the deck the seeds derive), each with the
lifetime to judge it by and the answer: which open hands are overdue and which pending. ``rotation``
holds key-rotation statements and what a holder of the old key accepts (docs/log-format.md, "Key
rotation"). Vectors of a published version never change: add, never alter.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairdeck.core.commitment import commit
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.seeds import server_seed_length
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.logentry import CLOSED, VOIDED, CommitEntry, RevealEntry, deck_digest
from fairdeck.log.note import Signer, sign_note
from fairdeck.log.rotation import rotation_text, sign_rotation

OUTPUT = Path(__file__).with_name("fairdeck-audit-v1.json")
VERSION = "fairdeck-v1"
DECK = "short"
ORIGIN = "log.example/fairdeck-audit-vectors"
T0 = 1_750_000_000_000
"""An ordinary time_ms; every case counts from it."""
LIFETIME = 60_000
"""The maximum hand lifetime of every overdue case, ms."""

Vector = dict[str, Any]


def label_bytes(label: str, length: int = 32) -> bytes:
    return hashlib.shake_256(b"fairdeck audit vectors\n" + label.encode()).digest(length)


SIGNER = Signer.from_seed(ORIGIN, label_bytes("key/log"))


class LogBuilder:
    """A log of real hands: commit, close and void entries, in the order they are called."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.notes: list[str] = []

    def _seed(self, hand_id: str) -> bytes:
        return label_bytes(f"seed/{hand_id}", server_seed_length(DeckSpec.parse(DECK)))

    def commit(self, hand_id: str, time_ms: int) -> int:
        commitment = commit(DECK, hand_id, self._seed(hand_id), version=VERSION)
        entry = CommitEntry(time_ms, hand_id, VERSION, DECK, commitment).encode()
        return self._add(entry, f"commit {hand_id}")

    def reveal(self, hand_id: str, time_ms: int, outcome: int) -> int:
        seed = self._seed(hand_id)
        cards = derive_deck(DECK, hand_id, seed, (), version=VERSION)
        entry = RevealEntry(time_ms, hand_id, outcome, seed, (), deck_digest(cards)).encode()
        return self._add(entry, f"{'close' if outcome == CLOSED else 'void'} {hand_id}")

    def _add(self, entry: bytes, what: str) -> int:
        self.entries.append(entry)
        self.notes.append(what)
        return len(self.entries) - 1

    def checkpoint(self) -> str:
        """The signed checkpoint of the whole log."""
        leaves = [merkle.leaf_hash(e) for e in self.entries]
        return sign_checkpoint(Checkpoint(ORIGIN, len(leaves), _root(leaves)), SIGNER).decode()


def _root(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return merkle.EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return merkle.node_hash(_root(leaves[:k]), _root(leaves[k:]))


def overdue_case(
    name: str, description: str, log: LogBuilder, overdue: Sequence[str], pending: Sequence[str], last: int
) -> Vector:
    """One log with its answer. ``last`` is the index of the entry the report names as the latest."""
    return {
        "name": name,
        "description": description,
        "max_hand_lifetime_ms": LIFETIME,
        "entries": [
            {"what": what, "entry": entry.hex()} for what, entry in zip(log.notes, log.entries, strict=True)
        ],
        "checkpoint": log.checkpoint(),
        "expected": {
            "ok": not overdue,
            "overdue": list(overdue),
            "pending": list(pending),
            "last_entry_index": last,
        },
    }


def overdue_vectors() -> list[Vector]:
    L = LIFETIME
    cases = []

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + 10)
    cases.append(
        overdue_case(
            "pending/nothing-after",
            "two open hands and nothing after them, however old: pending (the dealer has logged "
            "nothing since entry 1), never a finding; the auditor's clock is not used",
            log,
            [],
            ["a", "b"],
            1,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + L + 1)
    cases.append(
        overdue_case(
            "overdue/dealing-on",
            "hand a stays open while the dealer commits hand b more than the lifetime later: a is "
            "overdue (deck shopping?); b is pending",
            log,
            ["a"],
            ["b"],
            1,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + L)
    cases.append(
        overdue_case(
            "pending/exactly-the-lifetime",
            "an entry exactly the lifetime after an open hand does not make it overdue: more than "
            "the lifetime is needed",
            log,
            [],
            ["a", "b"],
            1,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + 5)
    log.reveal("b", T0 + L + 1, CLOSED)
    cases.append(
        overdue_case(
            "overdue/closed-later",
            "the game server closes hand b after a's lifetime has passed: a close advances the "
            "log's clock, so a is overdue",
            log,
            ["a"],
            [],
            2,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + 10)
    log.reveal("a", T0 + 5 * L, VOIDED)
    cases.append(
        overdue_case(
            "pending/after-downtime-voids",
            "the dealer restarts after a long downtime and voids hand a (a void of an overdue hand "
            "does not advance the log's clock); b, not voided yet, is still pending",
            log,
            [],
            ["b"],
            1,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + 10)
    log.reveal("a", T0 + 5 * L, VOIDED)
    log.reveal("b", T0 + 5 * L + 1, VOIDED)
    log.commit("c", T0 + 5 * L + 2)
    cases.append(
        overdue_case(
            "ok/downtime-then-voids-then-dealing",
            "after a downtime the dealer voids every stale hand first, then deals again: nothing "
            "is overdue, and c is pending",
            log,
            [],
            ["c"],
            4,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + 10)
    log.reveal("a", T0 + 5 * L, VOIDED)
    log.commit("c", T0 + 5 * L + 1)
    cases.append(
        overdue_case(
            "overdue/dealing-before-voiding",
            "after a downtime the dealer deals hand c before it voids b: b is overdue",
            log,
            ["b"],
            ["c"],
            3,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + 600)
    log.reveal("b", T0 + 600 + L, VOIDED)
    cases.append(
        overdue_case(
            "overdue/a-timely-void-advances-the-clock",
            "hand b is voided exactly at its lifetime (not overdue), so its void advances the "
            "log's clock past a's lifetime: a is overdue",
            log,
            ["a"],
            [],
            2,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + L + 5)
    log.commit("c", T0 + 1)
    cases.append(
        overdue_case(
            "overdue/times-out-of-order",
            "entry times out of order (an older dealer under load): the largest time after a hand "
            "counts, so a is overdue; b and c have nothing after them later than their lifetime",
            log,
            ["a"],
            ["b", "c"],
            1,
        )
    )

    log = LogBuilder()
    log.commit("a", T0)
    log.commit("b", T0 + L + 1)
    log.reveal("a", T0 + L + 2, VOIDED)
    cases.append(
        overdue_case(
            "ok/revealed-late",
            "hand a is voided after b was dealt: late, but revealed, so its deck is public and it "
            "is not a finding (the voided count shows it)",
            log,
            [],
            ["b"],
            1,
        )
    )
    return cases


ROTATION_ORIGIN = "log.example/fairdeck-rotation-vectors"


def rotation_vectors() -> dict[str, Any]:
    """Rotation statements, each valid or not, and cases: the keys trusted, the statements given,
    the keys a verifier ends up trusting (in the order followed), and whether a checkpoint signed
    by the newest key then verifies."""
    k1, k2, k3 = (Signer.from_seed(ROTATION_ORIGIN, label_bytes(f"key/rotation/{n}")) for n in (1, 2, 3))
    stranger = Signer.from_seed("log.example/another-log", label_bytes("key/rotation/stranger"))
    thief = Signer.from_seed(ROTATION_ORIGIN, label_bytes("key/rotation/thief"))
    s12, s23 = sign_rotation(k1, k2), sign_rotation(k2, k3)
    statements: dict[str, tuple[str, bytes, bool]] = {
        "1-to-2": ("key 1 names key 2, signed by both", s12, True),
        "2-to-3": ("key 2 names key 3, signed by both", s23, True),
        "old-only": (
            "key 1 names the thief's key, signed by key 1 alone (no proof the new key's holder agreed)",
            sign_note(rotation_text(k1.verifier, thief.verifier), k1),
            False,
        ),
        "new-only": (
            "key 1 names the thief's key, signed by the thief alone (the old key never said so)",
            sign_note(rotation_text(k1.verifier, thief.verifier), thief),
            False,
        ),
        "text-changed": (
            "the 1-to-2 statement with its new key line replaced by key 3's after signing",
            s12.replace(k2.verifier.to_string().encode(), k3.verifier.to_string().encode()),
            False,
        ),
        "other-origin": (
            "the origin line names another log than the keys' name",
            sign_note(
                f"fairdeck log key rotation v1\n{stranger.name}\n{k1.verifier.to_string()}\n"
                f"{k2.verifier.to_string()}\n",
                k1,
                k2,
            ),
            False,
        ),
        "not-a-statement": (
            "a checkpoint, not a statement",
            sign_checkpoint(Checkpoint(ROTATION_ORIGIN, 1, bytes(32)), k1),
            False,
        ),
    }

    def checkpoint_by(signer: Signer) -> str:
        return sign_checkpoint(Checkpoint(ROTATION_ORIGIN, 3, label_bytes("root")), signer).decode()

    def case(
        name: str, description: str, trusted: list[Signer], given: list[str], keys: list[Signer], by: Signer
    ) -> Vector:
        return {
            "name": name,
            "description": description,
            "trusted": [k.verifier.to_string() for k in trusted],
            "statements": given,
            "expected_keys": [k.verifier.to_string() for k in keys],
            "checkpoint": checkpoint_by(by),
            "checkpoint_verifies": any(k.key_id == by.key_id for k in keys),
        }

    return {
        "keys": {
            "1": k1.verifier.to_string(),
            "2": k2.verifier.to_string(),
            "3": k3.verifier.to_string(),
            "thief": thief.verifier.to_string(),
        },
        "statements": [
            {"name": n, "description": d, "note": note.decode(), "valid": valid}
            for n, (d, note, valid) in statements.items()
        ],
        "cases": [
            case(
                "one-rotation",
                "the holder of key 1 follows 1-to-2 and verifies key 2's checkpoint",
                [k1],
                ["1-to-2"],
                [k1, k2],
                k2,
            ),
            case(
                "chain-out-of-order",
                "statements in any order: key 1 leads to 2, then 3",
                [k1],
                ["2-to-3", "1-to-2"],
                [k1, k2, k3],
                k3,
            ),
            case(
                "key-list",
                "every key of a list is used: keys 2 and 1 given, a checkpoint by key 1 verifies",
                [k2, k1],
                [],
                [k2, k1],
                k1,
            ),
            case(
                "no-statement",
                "without the statement, key 1 alone does not verify key 2's checkpoint",
                [k1],
                [],
                [k1],
                k2,
            ),
            case(
                "forward-only",
                "a statement is followed from old to new only: key 2 does not come to trust key 1",
                [k2],
                ["1-to-2"],
                [k2],
                k1,
            ),
            case(
                "invalid-statements-ignored",
                "statements that do not verify lead nowhere",
                [k1],
                ["old-only", "new-only", "text-changed", "other-origin", "not-a-statement"],
                [k1],
                thief,
            ),
        ],
    }


def build() -> dict[str, Any]:
    return {
        "version": "fairdeck-audit-v1",
        "description": (
            "Vectors of docs/log-format.md, 'Overdue hands', made by docs/vectors/generate_audit.py. "
            "Each overdue case is a log of real hands (the 'short' deck, no client seeds), its "
            "checkpoint signed by 'key', the lifetime to judge it by, and the answer: the hand ids "
            "of open hands that are overdue (findings) and pending (not findings), and the index of "
            "the entry whose time the report gives as 'the dealer has logged nothing since'. "
            "'rotation' (docs/log-format.md, 'Key rotation'): statements, each 'valid' or not, and "
            "cases: the keys 'trusted', the statements given (by name), the keys a verifier then "
            "trusts in the order followed, and whether 'checkpoint' verifies under them. "
            "Never edit by hand."
        ),
        "key": {"origin": ORIGIN, "verifier_key": SIGNER.verifier.to_string()},
        "overdue": overdue_vectors(),
        "rotation": rotation_vectors(),
    }


def render(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=True) + "\n"


def document() -> str:
    return render(build())


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def main(argv: Sequence[str]) -> int:
    text = document()
    if "--check" in argv:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="ascii") != text:
            print(f"{OUTPUT} differs from what {Path(__file__).name} generates", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="ascii")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
