"""Hands from a live dealer, and the proof that each is in its signed log.

The only part of ``fairdeck.lab`` that speaks gRPC (through the SDK). ``LiveDealer`` deals
closed batches with ``DealHands(close=True)``; every hand is then checked like any other
(``collection.verify_dealt``). ``check_log`` runs when the collection is complete: it reads the
dealer's whole log through the AuditService into ``fairdeck.log.audit.Auditor`` (which checks the
latest signed checkpoint against the rebuilt tree, and that every revealed seed opens its
commitment and derives its logged deck), checks that the entries at each collected hand's commit
and reveal indexes are that hand's (``check_commit_entry``, ``check_reveal_entry``), and keeps
the entries in the collection as C2SP tiles (``log/``): what binds it to the signed checkpoint
for a lab offline (``fairdeck.lab.provenance``). Memory is tens of bytes per collected entry
(``_Expected``), not a transcript per hand.
"""

from __future__ import annotations

import os
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from fairdeck.client import AuditClient, DealerClient
from fairdeck.client.audit_client import codeal_checks
from fairdeck.client.exceptions import FairdeckError, NotInLog
from fairdeck.core.errors import VerificationError
from fairdeck.core.strictjson import StrictJSONError, bounded_loads
from fairdeck.core.transcript import Transcript
from fairdeck.lab import formats
from fairdeck.lab.collection import Dealt, KeyMismatch, transcript_from
from fairdeck.lab.provenance import LOG_DIR, TranscriptView
from fairdeck.log import safefiles
from fairdeck.log.audit import Auditor
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import check_commit_entry, check_reveal_entry
from fairdeck.log.tile_writer import TileDir, TileEdge

MAX_LISTED = 10


@dataclass
class LiveDealer:
    """A dealer at ``target``; ``key`` is its log's verifier key, given by the operator."""

    target: str
    key: Verifier
    credentials: grpc.ChannelCredentials | None = None
    api_token: str | None = None
    insecure: bool = False
    timeout: float = 60.0

    def __post_init__(self) -> None:
        self._key_checked = False
        self.description = f"live dealer at {self.target} (DealHands, closed)"
        self.dealer_key: str | None = self.key.to_string()
        self._client = DealerClient(
            self.target,
            credentials=self.credentials,
            api_token=self.api_token,
            insecure=self.insecure,
            timeout=self.timeout,
        )

    def deal(self, deck: str, count: int, client_seed: str, first: int) -> list[Dealt]:
        dealt = []
        for hand in self._client.deal_hands(deck, count, client_seeds=[client_seed], close=True):
            if hand.transcript is None or hand.reveal_receipt is None:
                raise VerificationError("format", f"hand {hand.hand_id} came back without its reveal")
            dealt.append(Dealt(hand.transcript, hand.commit_receipt.index, hand.reveal_receipt.index))
        if not self._key_checked and dealt:
            last = max(d.reveal_index for d in dealt if d.reveal_index is not None)
            with self.audit_client() as log:
                try:
                    _signed_note(log, last, wait_seconds=30.0)
                except VerificationError as e:
                    raise KeyMismatch(e.detail, dealt=len(dealt)) from None
            self._key_checked = True
        return dealt

    def check_key(self) -> None:
        """Check the dealer's latest signed checkpoint under ``key`` before any hand is dealt
        (KeyMismatch when it does not verify). A log with no checkpoint yet is checked after the
        first batch instead, before that batch is written (``deal``)."""
        with self.audit_client() as log:
            try:
                log.checkpoint()
            except NotInLog:
                return
            except VerificationError as e:
                raise KeyMismatch(e.detail, dealt=0) from None
        self._key_checked = True

    def audit_client(self) -> AuditClient:
        return AuditClient(
            self.target,
            verifier=self.key,
            credentials=self.credentials,
            api_token=self.api_token,
            insecure=self.insecure,
            timeout=self.timeout,
        )

    def close(self) -> None:
        self._client.close()


class _Expected:
    """Each collected hand's log indexes, sorted, with where its transcript line starts.

    Entries are read in index order, so they are matched by walking this list alongside them, and
    a transcript is read back (by its offset) only when its entry comes: memory is tens of bytes
    per entry, not a transcript per hand, so a collection of millions of hands can be checked.
    An entry's record is ``offset * 2 + is_reveal``, kept in an ``array``: no numpy needed.
    """

    def __init__(self, out: Path) -> None:
        indexes = array("q")
        records = array("q")
        self.file = os.fdopen(safefiles.open_file(out, formats.TRANSCRIPTS), "rb")
        offset = 0
        for line in self.file:
            log = _line(line)["log"]
            indexes.extend((int(log["commit"]), int(log["reveal"])))
            records.extend((2 * offset, 2 * offset + 1))
            offset += len(line)
        order = sorted(range(len(indexes)), key=indexes.__getitem__)
        self.indexes = array("q", (indexes[k] for k in order))
        self.records = array("q", (records[k] for k in order))
        self.next = 0
        self._last: tuple[int, Transcript] | None = None
        """The transcript read last, by its offset: a hand's commit and reveal entries are
        usually next to each other, so its line is parsed once for both."""

    @property
    def last(self) -> int:
        return self.indexes[-1] if self.indexes else -1

    @property
    def left(self) -> int:
        return len(self.indexes) - self.next

    def at(self, index: int) -> tuple[bool, Transcript] | None:
        """The hand whose entry is ``index`` (entries come in increasing order), or None."""
        if self.next < len(self.indexes) and self.indexes[self.next] == index:
            offset, is_reveal = divmod(self.records[self.next], 2)
            self.next += 1
            if self._last is None or self._last[0] != offset:
                self.file.seek(offset)
                self._last = offset, transcript_from(_line(self.file.readline())["transcript"])
            return bool(is_reveal), self._last[1]
        return None

    def close(self) -> None:
        self.file.close()


def _line(line: bytes) -> Any:
    """A transcript line of the collection, bounded before it is parsed."""
    try:
        return bounded_loads(line, what=f"a line of {formats.TRANSCRIPTS}")
    except StrictJSONError as e:
        raise VerificationError("malformed", str(e)) from None


def _signed_note(log: AuditClient, last: int, wait_seconds: float) -> tuple[bytes, int]:
    """The signed checkpoint note (and its size) of a tree that holds entry ``last``, as the
    dealer serves it with that entry's inclusion proof (checked under the key given). Waits up to
    ``wait_seconds`` for the dealer to sign a checkpoint that covers it."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            proof = log.inclusion_proof(max(last, 0))
            return proof.signed_checkpoint, proof.tree_size
        except FairdeckError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def check_log(
    dealer: LiveDealer,
    out: Path,
    *,
    wait_seconds: float = 30.0,
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Prove every collected hand is in the dealer's signed log (module docstring); a summary.

    Waits up to ``wait_seconds`` for a signed checkpoint that covers the last collected entry; raises
    FairdeckError when the dealer cannot be read, VerificationError when its checkpoint does not verify.
    """
    wanted = _Expected(out)
    problems: list[str] = []
    found = 0
    os.close(safefiles.open_dir(out, LOG_DIR, create=True))  # log/ is the collection's, not a link
    tiles, edge = TileDir(out / LOG_DIR, expect_new=True), TileEdge()
    with dealer.audit_client() as log:
        note, size = _signed_note(log, wanted.last, wait_seconds)
        # Deck shopping is not this check's business (a test dealer may hold open hands): no lifetime.
        # Its co-dealt hands' entries are checked as the audit checks them (codeal_checks).
        auditor = Auditor(dealer.key, max_hand_lifetime_ms=2**62, checkpoints=[note], codeal=codeal_checks)
        for index, data in log.entries():
            if index >= size:
                break
            auditor.add(data)
            for rel, tile in edge.extend([data]):
                tiles.put(rel, tile)
            expected = wanted.at(index)
            if expected is not None:
                is_reveal, t = expected
                try:
                    if is_reveal:
                        check_reveal_entry(data, TranscriptView(t))
                    else:
                        check_commit_entry(data, TranscriptView(t))
                    found += 1
                except VerificationError as e:
                    if len(problems) < MAX_LISTED:
                        problems.append(f"entry {index}: {e.detail}")
            if progress is not None:
                progress(1)
    wanted.close()
    for rel, tile in edge.partials():
        tiles.put(rel, tile)
    tiles.sync()
    report = auditor.finish()
    problems += [str(f) for f in report.findings[:MAX_LISTED]]
    if wanted.left:
        problems.append(
            f"{wanted.left:,} collected entries are not under the signed checkpoint (size {size})"
        )
    return {
        "ok": not problems and report.ok,
        "tree_size": size,
        "root": report.root.hex(),
        "checkpoint": note.decode("utf-8", errors="replace"),  # the signed note: a lab re-checks it offline
        "entries_checked": found,
        "problems": problems,
    }
