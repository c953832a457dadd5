"""The audit with its reveal checks in worker processes (fairdeck.log.audit_pool) gives exactly the
one-process report: the same counts and the same findings in the same order, on an honest log and
on one with every kind of fault a reveal check finds, mixed with the faults the sequential replay
finds, over many small batches so that results come back while the replay goes on."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fairdeck.core.local import deal_local
from fairdeck.log import merkle
from fairdeck.log.audit import Auditor
from fairdeck.log.audit_pool import RevealChecks
from fairdeck.log.checkpoint import Checkpoint, sign_checkpoint
from fairdeck.log.logentry import CLOSED, VOIDED, CommitEntry, RevealEntry, deck_digest
from fairdeck.log.note import Signer
from tests.support.logs import audit_data, database

SIGNER = Signer.from_seed("audit.test/parallel", bytes(32))
DECKS = ("standard", "short", "jokers", "shoe-2")


def hand_entries(i: int, rng: random.Random, fault: str | None) -> list[bytes]:
    deck = DECKS[i % len(DECKS)]
    t = deal_local(deck, f"h{i}", ["p"], entropy=rng.randbytes).transcript
    commit = CommitEntry(1_000 + i, t.hand_id, t.version, deck, t.commitment)
    seed, digest, outcome = t.server_seed, deck_digest(t.cards), VOIDED if i % 7 == 0 else CLOSED
    if fault == "seed":
        seed = bytes([seed[0] ^ 1]) + seed[1:]
    elif fault == "deck":
        digest = deck_digest(t.cards[::-1])
    elif fault == "invalid":
        seed = seed[:-1]  # a length the deck's seeds never have
    reveal = RevealEntry(2_000 + i, t.hand_id, outcome, seed, t.client_seeds, digest)
    entries = [commit.encode(), reveal.encode()]
    if fault == "twice":
        entries.append(reveal.encode())
    elif fault == "orphan":
        entries = [reveal.encode()]
    elif fault == "garbage":
        entries.append(b"FDL1\x09not an entry")
    return entries


def build(hands: int, faults: dict[int, str]) -> tuple[list[bytes], list[bytes]]:
    rng = random.Random(hands)
    entries: list[bytes] = []
    for i in range(hands):
        entries += hand_entries(i, rng, faults.get(i))
    leaves = [merkle.leaf_hash(e) for e in entries]
    sizes = sorted({len(entries)} | {rng.randrange(1, len(entries)) for _ in range(12)})
    notes = [sign_checkpoint(Checkpoint(SIGNER.name, s, merkle.root(leaves[:s])), SIGNER) for s in sizes]
    return entries, notes


def report(entries: list[bytes], notes: list[bytes], checks: RevealChecks | None) -> dict[str, object]:
    auditor = Auditor(SIGNER.verifier, max_hand_lifetime_ms=1, checkpoints=notes, checks=checks)
    for entry in entries:
        auditor.add(entry)
    return auditor.finish().to_dict()


@pytest.mark.parametrize(
    "faults",
    [
        {},
        {
            3: "seed",
            9: "deck",
            10: "invalid",
            20: "twice",
            31: "orphan",
            44: "garbage",
            45: "seed",
            60: "deck",
        },
    ],
    ids=["honest", "faulty"],
)
def test_worker_processes_give_the_one_process_report(faults: dict[int, str]) -> None:
    entries, notes = build(80, faults)
    alone = report(entries, notes, None)
    spread = report(entries, notes, RevealChecks(2, batch=3))
    assert spread == alone
    assert alone["ok"] == (not faults)
    if faults:
        problems = [f["problem"] for f in alone["findings"]]  # type: ignore[index]
        assert any("does not open the commitment" in p for p in problems)
        assert any("not the deck the seeds derive" in p for p in problems)
        assert any("revealed values are not valid" in p for p in problems)


def test_a_tampered_entry_is_reported_once_with_the_checks_elsewhere() -> None:
    """Entries altered under a signed checkpoint: one finding locating them, the reveal-check
    findings that follow from it counted, not listed, exactly as in one process."""
    entries, notes = build(40, {})
    entries[30] = hand_entries(15, random.Random(0), "seed")[1]  # another reveal in place of entry 30
    assert report(entries, notes, RevealChecks(1, batch=2)) == report(entries, notes, None)


def test_the_cli_report_is_the_same_with_any_number_of_workers(log_copy: Path) -> None:
    """``fairdeck audit --data --workers N`` on a real dealer's log with one reveal altered."""
    with database(log_copy) as db:
        idx, entry = db.execute(
            "SELECT idx, entry FROM log_entries ORDER BY idx DESC LIMIT 1 OFFSET 30"
        ).fetchone()
        data = bytearray(entry)
        data[-1] ^= 1  # the deck digest of a reveal (or the commitment of a commit)
        db.execute("UPDATE log_entries SET entry = ? WHERE idx = ?", (bytes(data), idx))
    reports = []
    for workers in ("0", "1", "2"):
        done = audit_data(log_copy, "--workers", workers)
        assert done.rc == 1, done.err
        report = done.report
        report.pop("seconds")
        reports.append(report)
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["findings"]
