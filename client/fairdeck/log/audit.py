"""The auditor: replays the whole transparency log and says what does not hold.

Pure: entries, checkpoints, the verifier key and the clock are passed in; the
``fairdeck audit`` command feeds it from a live server or a data dir. It
trusts nothing it is fed:

1. Every signed checkpoint verifies under the log's key, and its root equals
   the root rebuilt from the entries at its size (so no entry was altered,
   dropped, reordered or truncated, and no second root was signed for a size).
2. A checkpoint saved by an earlier audit (``--since``) is a prefix of this
   log: history was only appended to.
3. Every entry parses; hand ids are unique; every reveal follows its own
   commitment; the revealed seed opens the commitment; the deck re-derived from
   the seeds is the deck the dealer says it dealt (deck digest).
4. Deck shopping: a commitment older than the maximum hand lifetime with no
   reveal is reported. An honest dealer closes or voids every hand in time.

>>> from fairdeck.log.note import Signer
>>> auditor = Auditor(Signer.generate("example.log").verifier, now_ms=0, max_hand_lifetime_ms=1)
>>> auditor.finish().ok  # an empty log with no checkpoint is not a proof of anything
False
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fairdeck.core.commitment import commit
from fairdeck.core.derivation import derive_deck
from fairdeck.core.errors import InvalidInput
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from fairdeck.log.logentry import VOIDED, CommitEntry, EntryError, RevealEntry, deck_digest, decode
from fairdeck.log.note import NoteError, Verifier


@dataclass(frozen=True)
class Finding:
    """One thing that does not hold, with where it was found."""

    problem: str
    index: int | None = None
    hand_id: str | None = None

    def __str__(self) -> str:
        where = []
        if self.index is not None:
            where.append(f"entry {self.index}")
        if self.hand_id is not None:
            where.append(f"hand {self.hand_id}")
        return f"{', '.join(where) or 'log'}: {self.problem}"


@dataclass
class AuditReport:
    tree_size: int = 0
    root: bytes = b""
    checkpoint: Checkpoint | None = None
    """The newest checkpoint that verified (save it for the next ``--since``)."""
    checkpoint_note: bytes = b""
    entries: int = 0
    hands: int = 0
    closed: int = 0
    voided: int = 0
    open_in_time: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings and self.checkpoint is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "tree_size": self.tree_size,
            "root": self.root.hex(),
            "entries": self.entries,
            "hands": self.hands,
            "closed": self.closed,
            "voided": self.voided,
            "open_within_lifetime": self.open_in_time,
            "findings": [
                {"index": f.index, "hand_id": f.hand_id, "problem": f.problem} for f in self.findings
            ],
        }


class Auditor:
    """Feed it every entry in order with ``add``, then call ``finish``."""

    def __init__(
        self,
        verifier: Verifier | Sequence[Verifier],
        *,
        now_ms: int,
        max_hand_lifetime_ms: int,
        since: bytes | None = None,
        checkpoints: Iterable[bytes] = (),
        origin: str | None = None,
    ) -> None:
        # Several keys: the log's current and retired signing keys (checkpoints span a rotation).
        self.verifiers = [verifier] if isinstance(verifier, Verifier) else list(verifier)
        self.origin = origin or self.verifiers[0].name
        self.now_ms = now_ms
        self.lifetime_ms = max_hand_lifetime_ms
        self.report = AuditReport()
        self._stack: list[tuple[int, bytes]] = []  # complete subtrees: (leaf count, hash)
        # Hands committed and not yet revealed, and the ids of all hands: only
        # what later entries can need is kept, so memory stays small per hand.
        self._unrevealed: dict[str, tuple[int, CommitEntry]] = {}
        self._seen: set[str] = set()
        # Checkpoints to hold against the rebuilt tree, smallest first.
        self._pending: list[tuple[Checkpoint, bytes]] = []
        self._since: Checkpoint | None = None
        for note in checkpoints:
            self._expect(note, "checkpoint")
        if since is not None:
            cp = self._expect(since, "saved checkpoint (--since)")
            self._since = cp
        self._pending.sort(key=lambda p: p[0].size)

    def _expect(self, note: bytes, what: str) -> Checkpoint | None:
        try:
            cp = open_checkpoint(note, self.verifiers, self.origin)
        except (CheckpointError, NoteError) as e:
            self.report.findings.append(Finding(f"{what} does not verify under the log key: {e}"))
            return None
        self._pending.append((cp, note))
        return cp

    @property
    def size(self) -> int:
        return self.report.entries

    def root(self) -> bytes:
        """The root of the tree of every entry added so far."""
        if not self._stack:
            return merkle.EMPTY_ROOT
        h = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            h = merkle.node_hash(left, h)
        return h

    def add(self, data: bytes) -> None:
        """The next entry of the log (index = entries added so far)."""
        index = self.report.entries
        self._push(merkle.leaf_hash(data))
        self.report.entries += 1
        self._check_checkpoints()
        try:
            entry = decode(data)
        except EntryError as e:
            self._find(f"entry does not parse: {e}", index)
            return
        if isinstance(entry, CommitEntry):
            self._commit(index, entry)
        else:
            self._reveal(index, entry)

    def _push(self, leaf: bytes) -> None:
        count, h = 1, leaf
        while self._stack and self._stack[-1][0] == count:
            left_count, left = self._stack.pop()
            count, h = left_count + count, merkle.node_hash(left, h)
        self._stack.append((count, h))

    def _check_checkpoints(self) -> None:
        while self._pending and self._pending[0][0].size == self.size:
            cp, note = self._pending.pop(0)
            if not hmac.compare_digest(cp.root, self.root()):
                self._find(f"signed checkpoint for tree size {cp.size} does not match the entries")
            elif self.report.checkpoint is None or cp.size >= self.report.checkpoint.size:
                self.report.checkpoint, self.report.checkpoint_note = cp, note

    def _commit(self, index: int, entry: CommitEntry) -> None:
        if entry.hand_id in self._seen:
            self._find("hand id committed twice", index, entry.hand_id)
            return
        self._seen.add(entry.hand_id)
        self._unrevealed[entry.hand_id] = (index, entry)
        self.report.hands += 1

    def _reveal(self, index: int, entry: RevealEntry) -> None:
        pending = self._unrevealed.pop(entry.hand_id, None)
        if pending is None:
            seen = entry.hand_id in self._seen
            self._find(
                "hand revealed twice" if seen else "reveal without a prior commitment", index, entry.hand_id
            )
            return
        c = pending[1]
        try:
            expected = commit(c.deck, c.hand_id, entry.server_seed, version=c.version)
            cards = derive_deck(c.deck, c.hand_id, entry.server_seed, entry.client_seeds, version=c.version)
        except InvalidInput as e:
            self._find(f"revealed values are not valid: {e}", index, entry.hand_id)
            return
        if not hmac.compare_digest(expected, c.commitment):
            self._find("revealed server seed does not open the commitment", index, entry.hand_id)
        elif not hmac.compare_digest(deck_digest(cards), entry.deck_digest):
            self._find("the deck dealt is not the deck the seeds derive", index, entry.hand_id)
        elif entry.outcome == VOIDED:
            self.report.voided += 1
        else:
            self.report.closed += 1

    def _find(self, problem: str, index: int | None = None, hand_id: str | None = None) -> None:
        self.report.findings.append(Finding(problem, index, hand_id))

    def finish(self) -> AuditReport:
        """Checks that need the whole log; returns the report."""
        r = self.report
        for cp, _ in self._pending:  # checkpoints for sizes the entries never reached
            self._find(f"log truncated: a checkpoint signs {cp.size} entries, only {r.entries} are present")
        self._pending.clear()
        if r.checkpoint is None:
            self._find("no signed checkpoint covers the log")
        if self._since is not None and (r.checkpoint is None or r.checkpoint.size < self._since.size):
            self._find(f"the log is smaller than the saved checkpoint ({self._since.size} entries)")
        for hand_id, (index, c) in self._unrevealed.items():
            if self.now_ms - c.time_ms > self.lifetime_ms:
                self._find(
                    "committed but never revealed within the maximum hand lifetime (deck shopping?)",
                    index,
                    hand_id,
                )
            else:
                r.open_in_time += 1
        r.tree_size = r.checkpoint.size if r.checkpoint else 0
        r.root = r.checkpoint.root if r.checkpoint else b""
        return r
