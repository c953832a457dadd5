"""The auditor: replays the whole transparency log and says what does not hold.

Pure: entries, checkpoints, the verifier key and the lifetime are passed in; the ``fairdeck audit``
command feeds it. It trusts nothing it is fed. It checks that every signed checkpoint verifies
and matches the root rebuilt from the entries, that a checkpoint saved by an earlier audit
(``--since``) is a prefix of this log, that every reveal opens and re-derives its own commitment,
and that no commitment went unrevealed past the maximum hand lifetime by the log's own clock
(``overdue.py``; an open hand with nothing later is pending, not a finding). Co-dealt entries (types
3 to 7) go to the co-dealt checks it is given (fairdeck.codeal.log_audit). An altered entry is
reported once, where the checkpoints place it (docs/log-format.md, "The audit").

>>> from fairdeck.log.note import Signer
>>> auditor = Auditor(Signer.generate("example.log").verifier, max_hand_lifetime_ms=1)
>>> report = auditor.finish()  # a fresh dealer: no entry, nothing signed yet
>>> report.ok, report.tree_size, report.root == merkle.EMPTY_ROOT
(True, 0, True)
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fairdeck.core.commitment import commit
from fairdeck.core.derivation import plan
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import check_server_seed
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from fairdeck.log.cosignature import CosignatureError, PolicyResult, WitnessPolicy
from fairdeck.log.logentry import (
    CLOSED,
    MAGIC,
    VOIDED,
    CommitEntry,
    EntryError,
    RevealEntry,
    deck_digest,
    decode,
)
from fairdeck.log.note import NoteError, UnverifiedNoteError, Verifier, open_note
from fairdeck.log.overdue import LogClock, is_overdue
from fairdeck.log.rotation import RotationError, follow, is_rotation, open_rotation

CheckResult = tuple[int, str, int, "int | str"]
"""A reveal checked elsewhere: (entry index, hand id, findings count when submitted, result)."""


class RevealChecker(Protocol):
    """Where reveals are checked besides the auditor's process (fairdeck.log.audit_pool)."""

    def submit(self, index: int, hand_id: str, job: tuple[Any, ...], position: int) -> list[CheckResult]:
        """Queue ``check_reveal(*job)``; the results that came back meanwhile, in order."""
        ...

    def results(self) -> Iterable[CheckResult]:
        """The rest of the results, in submission order."""
        ...


def check_reveal(
    deck: str,
    hand_id: str,
    version: str,
    commitment: bytes,
    server_seed: bytes,
    client_seeds: tuple[bytes, ...],
    digest: bytes,
    outcome: int,
) -> int | str:
    """The per-hand check of a reveal against its commitment (check 3 of the module docstring):
    its outcome (``CLOSED`` or ``VOIDED``) if the seed opens the commitment and the deck the seeds
    derive is the deck dealt, else the problem. A pure function of one hand, so any process can
    run it (fairdeck.log.audit_pool). Its inputs are fields of entries ``decode`` accepted: the
    hand id, version, deck and client seeds are checked already."""
    try:
        expected = commit(deck, hand_id, server_seed, version=version)
        # derive_deck's checks, without those ``decode`` made already (the id, seeds' lengths).
        p = plan(version, deck)
        if len(server_seed) != p.seed_bytes:
            check_server_seed(p.spec, server_seed)
        cards = p.derive(hand_id, server_seed, client_seeds)
    except InvalidInput as e:
        return f"revealed values are not valid: {e}"
    if not hmac.compare_digest(expected, commitment):
        return "revealed server seed does not open the commitment"
    if not hmac.compare_digest(deck_digest(cards), digest):
        return "the deck dealt is not the deck the seeds derive"
    return VOIDED if outcome == VOIDED else CLOSED


CODEALT_TYPES = frozenset({3, 4, 5, 6, 7})
"""Entry types of co-dealt hands (docs/log-format.md, "Co-dealt entries")."""


class CodealChecks(Protocol):
    """The checks of co-dealt entries (fairdeck.codeal.log_audit.CodealLogAudit): apart, so that
    an auditor of ordinary hands never loads the co-dealt code (libsodium)."""

    def add(
        self, index: int, data: bytes, ordinary: Container[str]
    ) -> tuple[int | None, list[tuple[int | None, str | None, str]]]: ...
    def knows(self, hand_id: str) -> bool: ...
    def finish(self) -> list[tuple[int | None, str | None, str]]: ...
    @property
    def verified(self) -> int: ...
    @property
    def open(self) -> int: ...
    @property
    def set_up(self) -> int: ...
    @property
    def repeated(self) -> int: ...
    @property
    def seals_verified(self) -> int: ...
    @property
    def unsealed(self) -> int: ...
    def open_before(self, before_ms: int) -> int: ...


class LogUnreadable(Exception):
    """The store holding the log cannot be read at all (missing, corrupt, foreign); the
    message names it and the fix. Not a finding: nothing could be checked."""


class SavedCheckpointUnreadable(Exception):
    """The checkpoint saved by an earlier audit (``--since``) is empty, cut, not a checkpoint, or
    signed by no key given: the auditor's own file, so it says nothing about the log. Not a
    finding: the message says what is wrong with the file."""


@dataclass(frozen=True)
class Finding:
    """One thing that does not hold, with where it was found."""

    problem: str
    index: int | None = None
    hand_id: str | None = None
    last_index: int | None = None
    """Set when the finding is about a range of entries, ``index`` to ``last_index``."""

    def __str__(self) -> str:
        where = []
        if self.index is not None and self.last_index is not None:
            where.append(f"entries {self.index} to {self.last_index}")
        elif self.index is not None:
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
    """Hands still open and not overdue: the log holds nothing more than the lifetime after them."""
    codeal_hands: int = 0
    """Co-dealt hands (a setup entry each)."""
    codeal_verified: int = 0
    """Co-dealt hands whose seeds are logged and whose whole record verifies (codealing-spec 10)."""
    codeal_open: int = 0
    """Co-dealt hands set up whose seeds are not logged yet."""
    codeal_open_past_lifetime: int = 0
    """Of ``codeal_open``, those set up more than the lifetime before the log's latest time: not
    findings (a co-dealt deck cannot be shopped by the dealer alone; codealing-spec section 11)."""
    codeal_repeated: int = 0
    """Co-dealt entries logged again by a retry, identical but for their time: not findings."""
    codeal_seals_verified: int = 0
    """Seals entries whose signatures verified under the pinned co-dealer keys (0 without them)."""
    codeal_unsealed: int = 0
    """Co-dealt hands closed with no seals entry (closed before the dealer logged seals)."""
    last_entry: tuple[int, int] | None = None
    """(index, time_ms) of the entry with the latest time that advances the log's clock: while
    hands are pending, "the dealer has logged nothing since" that time."""
    findings: list[Finding] = field(default_factory=list)

    consistency: str | None = None
    """With ``--since``: what was proved against the saved checkpoint, in words (None without it)."""
    witnesses: str | None = None
    """With a witness policy: who cosigned the checkpoint reached, in words (None without one)."""
    rotations: list[str] = field(default_factory=list)
    """Key rotations the audit followed from the keys it was given (``old -> new``), in order."""
    unread: str | None = None
    """Why the log could not be read to its end (a finding too; what came before it was checked):
    the cause that a report's headline carries, rather than the empty log it would look like."""
    keys_needed: dict[str, int] = field(default_factory=dict)
    """Checkpoints not checked, by the verifier key that signed them: the log's key before a
    rotation that a key given signed (rotation statements are followed forward only). Not a
    finding: the audit is incomplete until that key is given too."""

    @property
    def ok(self) -> bool:
        # An empty log needs no checkpoint: its root is the hash of the empty tree (RFC 9162 2.1.1).
        return not self.findings and (self.checkpoint is not None or self.entries == 0)

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
            "codeal": {
                "hands": self.codeal_hands,
                "verified": self.codeal_verified,
                "open": self.codeal_open,
                "repeated": self.codeal_repeated,
                "seals_verified": self.codeal_seals_verified,
                "unsealed": self.codeal_unsealed,
                "open_past_lifetime": self.codeal_open_past_lifetime,
            },
            "last_entry_index": None if self.last_entry is None else self.last_entry[0],
            "last_entry_ms": None if self.last_entry is None else self.last_entry[1],
            "consistency": self.consistency,
            "witnesses": self.witnesses,
            "key_rotations": list(self.rotations),
            "keys_needed": dict(self.keys_needed),
            "findings": [
                {"index": f.index, "last_index": f.last_index, "hand_id": f.hand_id, "problem": f.problem}
                for f in self.findings
            ],
        }


class Auditor:
    """Feed it every entry in order with ``add``, then call ``finish``."""

    def __init__(
        self,
        verifier: Verifier | Sequence[Verifier],
        *,
        max_hand_lifetime_ms: int,
        since: bytes | None = None,
        checkpoints: Iterable[bytes] = (),
        origin: str | None = None,
        policy: WitnessPolicy | None = None,
        checks: RevealChecker | None = None,
        codeal: Callable[[], CodealChecks] | None = None,
    ) -> None:
        """``checks``: where the reveals are checked (fairdeck.log.audit_pool, worker processes);
        None: here, one after another. The report is the same either way. ``codeal``: makes the
        co-dealt checks, at the first co-dealt entry; None: such an entry is a finding."""
        self._checks = checks
        self._make_codeal = codeal
        self._codeal: CodealChecks | None = None
        self._placed: list[tuple[int, int, Finding]] = []
        """Findings of checks done elsewhere: (findings count when submitted, order, the finding)."""
        # Several keys: the log's current and retired signing keys (checkpoints span a rotation).
        # ``checkpoints`` may also hold key rotation statements: each one a trusted key signed
        # leads to the key it names (rotation.py), and the report says so.
        given = [verifier] if isinstance(verifier, Verifier) else list(verifier)
        notes = list(checkpoints)
        statements = [n for n in notes if is_rotation(n)]
        self.verifiers, followed = follow(given, statements)
        self._before: list[Verifier] = []
        """Keys the log used before a rotation to a trusted key (valid statements, both keys
        signed), not trusted themselves: a checkpoint one of them signed is set aside, not found."""
        for note in statements:
            try:
                r = open_rotation(note)
            except RotationError:
                continue
            if r.new in self.verifiers and r.old not in self.verifiers and r.old not in self._before:
                self._before.append(r.old)
        self.origin = origin or self.verifiers[0].name
        self.lifetime_ms = max_hand_lifetime_ms
        self.clock = LogClock()
        """The log's own clock: every entry's time but a void of an overdue hand's (overdue.py)."""
        self.report = AuditReport()
        self.policy = policy
        """With a policy, only checkpoints its threshold of witnesses cosigned count as reached."""
        self._unwitnessed: PolicyResult | None = None
        self._stack: list[tuple[int, bytes]] = []  # complete subtrees: (leaf count, hash)
        # Hands committed and not yet revealed, and the ids of all hands: only
        # what later entries can need is kept, so memory stays small per hand.
        self._unrevealed: dict[str, tuple[int, CommitEntry]] = {}
        self._seen: set[str] = set()
        # Checkpoints to hold against the rebuilt tree, smallest first.
        self._pending: list[tuple[Checkpoint, bytes]] = []
        # Each checkpoint reached, in size order: (it, whether its root matched the entries).
        self._held: list[tuple[Checkpoint, bool]] = []
        self._since: Checkpoint | None = None
        self.report.rotations = [r.describe() for r in followed]
        for note in statements:
            try:
                open_rotation(note)
            except RotationError as e:
                self.report.findings.append(Finding(f"key rotation statement does not verify: {e}"))
        for note in notes:
            if not is_rotation(note):
                self._expect(note, "checkpoint")
        self._since_given = since is not None
        if since is not None:
            self._since = self._saved(since)
        self._pending.sort(key=lambda p: p[0].size)

    def _saved(self, note: bytes) -> Checkpoint | None:
        """The saved checkpoint, or SavedCheckpointUnreadable; None (set aside) when a key
        before a rotation signed it, as for the log's own checkpoints."""
        if not note.strip():
            raise SavedCheckpointUnreadable("it is empty")
        try:
            open_note(note, ())
        except UnverifiedNoteError as e:  # well formed; no key was asked to verify it
            try:
                Checkpoint.parse(e.note.text)
            except CheckpointError as bad:
                raise SavedCheckpointUnreadable(f"it is not a checkpoint: {bad}") from None
        except NoteError as e:
            raise SavedCheckpointUnreadable(f"not a whole signed checkpoint (cut short?): {e}") from None
        found = len(self.report.findings)
        checkpoint = self._expect(note, "saved checkpoint (--since)")
        if len(self.report.findings) > found:
            problem = self.report.findings.pop().problem
            raise SavedCheckpointUnreadable(f"{problem} (a checkpoint of another log, or the wrong --key?)")
        return checkpoint

    def _expect(self, note: bytes, what: str) -> Checkpoint | None:
        try:
            cp = open_checkpoint(note, self.verifiers, self.origin)
        except (CheckpointError, NoteError) as e:
            for earlier in self._before:
                try:
                    open_checkpoint(note, [earlier], self.origin)
                except (CheckpointError, NoteError):
                    continue
                key = earlier.to_string()
                self.report.keys_needed[key] = self.report.keys_needed.get(key, 0) + 1
                return None
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

    def add(self, data: bytes, leaf: bytes | None = None) -> None:
        """The next entry of the log (index = entries added so far). ``leaf``: its RFC 9162 leaf
        hash, when the source already computed and checked it (a tile reader does)."""
        index = self.report.entries
        self._push(merkle.leaf_hash(data) if leaf is None else leaf)
        self.report.entries += 1
        self._check_checkpoints()
        if data[4:5] and data[4] in CODEALT_TYPES and data[:4] == MAGIC:
            self._codealt(index, data)
            return
        try:
            entry = decode(data)
        except EntryError as e:
            self._find(f"entry does not parse: {e}", index)
            return
        if isinstance(entry, CommitEntry):
            self._commit(index, entry)
        elif self._reveal(index, entry):
            return  # a void of an overdue hand does not advance the log's clock
        self.clock.tick(index, entry.time_ms)

    def _codealt(self, index: int, data: bytes) -> None:
        if self._codeal is None:
            if self._make_codeal is None:
                self._find("a co-dealt entry, and this auditor was given no co-dealt checks", index)
                return
            self._codeal = self._make_codeal()
        time_ms, found = self._codeal.add(index, data, self._seen)
        for where, hand_id, problem in found:
            self._find(problem, where, hand_id)
        if time_ms is not None:
            self.clock.tick(index, time_ms)

    def _push(self, leaf: bytes) -> None:
        count, h = 1, leaf
        while self._stack and self._stack[-1][0] == count:
            left_count, left = self._stack.pop()
            count, h = left_count + count, hashlib.sha256(b"\x01" + left + h).digest()  # RFC 9162 node
        self._stack.append((count, h))

    def _check_checkpoints(self) -> None:
        while self._pending and self._pending[0][0].size == self.size:
            cp, note = self._pending.pop(0)
            matched = hmac.compare_digest(cp.root, self.root())
            self._held.append((cp, matched))
            if not matched or not self._witnessed(cp, note):
                continue
            if self.report.checkpoint is None or cp.size >= self.report.checkpoint.size:
                self.report.checkpoint, self.report.checkpoint_note = cp, note

    def _witnessed(self, cp: Checkpoint, note: bytes) -> bool:
        """Whether the checkpoint meets the witness policy (always, without one)."""
        if self.policy is None:
            return True
        try:
            result = self.policy.check(note)
        except CosignatureError as e:
            self._find(f"checkpoint for tree size {cp.size}: {e}")
            return False
        if result.ok:
            self.report.witnesses = result.describe()
        else:
            self._unwitnessed = result
        return result.ok

    def _commit(self, index: int, entry: CommitEntry) -> None:
        if entry.hand_id in self._seen or (self._codeal is not None and self._codeal.knows(entry.hand_id)):
            self._find("hand id committed twice", index, entry.hand_id)
            return
        self._seen.add(entry.hand_id)
        self._unrevealed[entry.hand_id] = (index, entry)
        self.report.hands += 1

    def _reveal(self, index: int, entry: RevealEntry) -> bool:
        """Check a reveal against its commitment; True when it voids an overdue hand."""
        pending = self._unrevealed.pop(entry.hand_id, None)
        if pending is None:
            seen = entry.hand_id in self._seen
            self._find(
                "hand revealed twice" if seen else "reveal without a prior commitment", index, entry.hand_id
            )
            return False
        c = pending[1]
        check = (c.deck, c.hand_id, c.version, c.commitment, entry.server_seed, entry.client_seeds)
        job = (*check, entry.deck_digest, entry.outcome)
        if self._checks is None:
            self._checked(index, entry.hand_id, check_reveal(*job))
        else:  # its finding, if any, goes where it would have been found in order
            for result in self._checks.submit(index, entry.hand_id, job, len(self.report.findings)):
                self._returned(*result)
        # A void of an overdue hand does not advance the log's clock (docs/log-format.md, "Overdue hands").
        return entry.outcome == VOIDED and entry.time_ms - c.time_ms > self.lifetime_ms

    def _returned(self, index: int, hand_id: str, position: int, result: int | str) -> None:
        if isinstance(result, str):
            self._placed.append((position, len(self._placed), Finding(result, index, hand_id)))
        else:
            self._checked(index, hand_id, result)

    def _checked(self, index: int, hand_id: str, result: int | str) -> None:
        if isinstance(result, str):
            self._find(result, index, hand_id)
        elif result == VOIDED:
            self.report.voided += 1
        else:
            self.report.closed += 1

    def _find(self, problem: str, index: int | None = None, hand_id: str | None = None) -> None:
        self.report.findings.append(Finding(problem, index, hand_id))

    def finish(self) -> AuditReport:
        """Checks that need the whole log; returns the report."""
        r = self.report
        if self._checks is not None:
            for result in self._checks.results():
                self._returned(*result)
            for position, _, finding in sorted(self._placed, reverse=True):
                r.findings.insert(position, finding)
            self._checks, self._placed = None, []
        if self._pending:  # checkpoints for sizes the entries never reached: one finding, the largest
            cp = self._pending[-1][0]
            whose = " (the checkpoint saved by the earlier audit)" if cp is self._since else ""
            self._find(
                f"log truncated: a checkpoint signs {cp.size} entries, only {r.entries} are present{whose}"
            )
        self._pending.clear()
        if self._codeal is not None:
            for where, hand_id, problem in self._codeal.finish():
                self._find(problem, where, hand_id)
            r.codeal_hands, r.codeal_open = self._codeal.set_up, self._codeal.open
            r.codeal_verified = self._codeal.verified
            r.codeal_repeated = self._codeal.repeated
            r.codeal_seals_verified, r.codeal_unsealed = self._codeal.seals_verified, self._codeal.unsealed
            latest = self.clock.latest  # the log's own time, as for ordinary hands
            if latest is not None:
                r.codeal_open_past_lifetime = self._codeal.open_before(latest[1] - self.lifetime_ms)
        altered = self._altered()
        if altered is None:
            if r.checkpoint is None and r.entries and self._unwitnessed is not None:
                self._find(
                    f"no checkpoint meets the witness policy: the latest {self._unwitnessed.describe()}"
                )
            elif r.checkpoint is None and r.entries:
                self._find("no signed checkpoint covers the log")
            self._deck_shopping()
        r.tree_size = r.checkpoint.size if r.checkpoint else 0
        # The empty tree needs no signature: its root is SHA-256 of nothing (RFC 9162 2.1.1).
        r.root = r.checkpoint.root if r.checkpoint else merkle.EMPTY_ROOT if r.entries == 0 else b""
        r.consistency = self._consistency()
        return r

    def _altered(self) -> int | None:
        """Checkpoint roots that do not match: forks, or entries altered. Returns the
        index of the first entry that may be altered (None: none is)."""
        matched = [cp.size for cp, ok in self._held if ok]
        newest_match = max(matched, default=-1)
        broken = [cp for cp, ok in self._held if not ok]
        # A signed root that a LARGER (or equal) matching checkpoint contradicts: the entries are
        # what the dealer signed later, so this root is a second history signed for its size.
        for cp in broken:
            if cp.size <= newest_match:
                self._find(
                    f"signed checkpoint for tree size {cp.size} does not match the entries (the "
                    f"checkpoint for tree size {newest_match} signs them: two histories were signed)"
                )
        later = [cp for cp in broken if cp.size > newest_match]
        if not later:
            return None
        # No signed root vouches for the entries from here on: the first altered entry lies
        # between the largest checkpoint that matches and the smallest that does not.
        first, bad = max(newest_match, 0), later[0].size
        kept = [f for f in self.report.findings if f.index is None or f.index < first]
        following = [f for f in self.report.findings if f.index is not None and f.index >= first]
        in_range = [f for f in following if f.index is not None and f.index < bad]
        good = (
            f"the checkpoint for tree size {first} matches" if newest_match >= 0 else "no checkpoint matches"
        )
        if bad - first == 1:
            problem = f"altered: not the entry that the signed checkpoint for tree size {bad} signs ({good})"
            if in_range:
                problem += f"; it also fails a check: {in_range[0].problem}"
            finding = Finding(problem, first)
        else:
            problem = (
                f"one of these entries is altered: the signed checkpoint for tree size {bad} does not "
                f"match them ({good})"
            )
            if in_range:
                problem += f"; the first to fail a check is entry {in_range[0].index}: {in_range[0].problem}"
            finding = Finding(problem, first, last_index=bad - 1)
        consequences = len(later) - 1 + len(following) - (1 if in_range else 0)
        if consequences:
            finding = Finding(
                f"{finding.problem}; {consequences} later finding(s) follow from it and are not listed",
                finding.index,
                last_index=finding.last_index,
            )
        self.report.findings = [*kept, finding]
        return first

    def _deck_shopping(self) -> None:
        r = self.report
        r.last_entry = self.clock.latest
        lifetime = self.lifetime_ms / 1000
        for hand_id, (index, c) in self._unrevealed.items():
            later = self.clock.latest_after(index)
            if is_overdue(c.time_ms, later, self.lifetime_ms):
                assert later is not None
                self._find(
                    f"committed but never revealed within the maximum hand lifetime ({lifetime:g} s), while "
                    f"the dealer kept logging {(later - c.time_ms) / 1000:g} s after it (deck shopping?)",
                    index,
                    hand_id,
                )
            else:
                r.open_in_time += 1

    def _consistency(self) -> str | None:
        if not self._since_given:
            return None
        if self._since is None:
            return "consistency NOT checked: the saved checkpoint does not verify under the log key"
        held = [ok for cp, ok in self._held if cp is self._since]
        if held == [True]:
            return f"consistent with the saved checkpoint (tree size {self._since.size}): the log only grew"
        return f"NOT consistent with the saved checkpoint (tree size {self._since.size})"
