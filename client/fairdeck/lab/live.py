"""Hands from a live dealer, and the proof that each is in its signed log.

The only part of ``fairdeck.lab`` that speaks gRPC (through the SDK). ``LiveDealer`` deals
closed batches with ``DealHands(close=True)``; every hand is then checked like any other
(``collection.verify_dealt``). ``check_log`` runs when the collection is complete: it reads the
dealer's whole log through the AuditService into ``fairdeck.log.audit.Auditor`` (which checks the
latest signed checkpoint against the rebuilt tree, and that every revealed seed opens its
commitment and derives its logged deck), and checks that the entries at each collected hand's
commit and reveal indexes are that hand's (``check_commit_entry``, ``check_reveal_entry``).
Memory grows with the collected hands (their transcripts, until their entries are read).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from fairdeck.client import AuditClient, ClientConfig, DealerClient
from fairdeck.core.errors import VerificationError
from fairdeck.core.transcript import Transcript
from fairdeck.lab import formats
from fairdeck.lab.collection import Dealt, transcript_from
from fairdeck.log.audit import Auditor
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import check_commit_entry, check_reveal_entry, open_signed_checkpoint
from fairdeck.v1 import audit_pb2, audit_pb2_grpc

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
        return dealt

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


@dataclass(frozen=True)
class _View:
    """What ``check_commit_entry`` and ``check_reveal_entry`` read of a hand."""

    transcript: Transcript

    @property
    def hand_id(self) -> str:
        return self.transcript.hand_id

    @property
    def deck(self) -> str:
        return self.transcript.deck

    @property
    def version(self) -> str:
        return self.transcript.version

    @property
    def commitment(self) -> bytes:
        return self.transcript.commitment


def _expected(out: Path) -> dict[int, tuple[bool, Transcript]]:
    """Each collected hand's log indexes: ``index -> (is the reveal, transcript)``."""
    wanted: dict[int, tuple[bool, Transcript]] = {}
    with (out / formats.TRANSCRIPTS).open("rb") as f:
        for line in f:
            record = json.loads(line)
            t = transcript_from(record["transcript"])
            wanted[int(record["log"]["commit"])] = (False, t)
            wanted[int(record["log"]["reveal"])] = (True, t)
    return wanted


def signed_checkpoint(dealer: LiveDealer) -> bytes:
    """The latest signed checkpoint note, as the dealer serves it (checked by the Auditor)."""
    config = ClientConfig(
        dealer.target, credentials=dealer.credentials, api_token=dealer.api_token, insecure=dealer.insecure
    )
    channel = config.channel()
    try:
        stub = audit_pb2_grpc.AuditServiceStub(channel)
        response = stub.GetCheckpoint(
            audit_pb2.GetCheckpointRequest(), timeout=dealer.timeout, metadata=config.call_metadata()
        )
        note: bytes = response.signed_checkpoint
        return note
    finally:
        channel.close()


def check_log(
    dealer: LiveDealer,
    out: Path,
    *,
    wait_seconds: float = 30.0,
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Prove every collected hand is in the dealer's signed log (module docstring); a summary.

    Waits up to ``wait_seconds`` for a signed checkpoint that covers the last collected entry.
    """
    wanted = _expected(out)
    last = max(wanted, default=-1)
    deadline = time.monotonic() + wait_seconds
    while True:
        note = signed_checkpoint(dealer)
        size = open_signed_checkpoint(note, dealer.key).size  # raises VerificationError
        if size > last or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    auditor = Auditor(
        dealer.key, now_ms=int(time.time() * 1000), max_hand_lifetime_ms=2**62, checkpoints=[note]
    )
    problems: list[str] = []
    found = 0
    with dealer.audit_client() as log:
        for index, data in log.entries():
            if index >= size:
                break
            auditor.add(data)
            expected = wanted.pop(index, None)
            if expected is not None:
                is_reveal, t = expected
                try:
                    if is_reveal:
                        check_reveal_entry(data, _View(t))
                    else:
                        check_commit_entry(data, _View(t))
                    found += 1
                except VerificationError as e:
                    if len(problems) < MAX_LISTED:
                        problems.append(f"entry {index}: {e.detail}")
            if progress is not None:
                progress(1)
    report = auditor.finish()
    problems += [str(f) for f in report.findings[:MAX_LISTED]]
    if wanted:
        problems.append(
            f"{len(wanted):,} collected entries are not under the signed checkpoint (size {size})"
        )
    return {
        "ok": not problems and report.ok,
        "tree_size": size,
        "root": report.root.hex(),
        "entries_checked": found,
        "problems": problems,
    }
