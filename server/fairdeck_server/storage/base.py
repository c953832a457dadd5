"""The storage interface and the records it keeps.

Engines (and the metrics wrapper) subclass ``Storage``, an ABC listing every method the server
uses, and implement all of it; the dealer's logic stays out of them. An
update runs a pure function of the current record inside the engine's
transaction, so each engine provides atomicity its own way (one writer thread
for SQLite, row locks for a server database) while the rules live in one
place (dealer.py). Nothing an engine returns is acknowledged before it is
durable. What both engines do alike is written once: here the tree's frontier and the
idempotent-open comparison, in rows.py the rows they store.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fairdeck.log import merkle
from fairdeck_server import refusals

T = TypeVar("T")
_sha256 = hashlib.sha256


class StoredHandState(enum.IntEnum):
    OPEN = 1
    SHUFFLED = 2
    CLOSED = 3


@dataclass(frozen=True)
class HandRecord:
    """A hand as stored. ``sealed_seed`` is AES-GCM ciphertext; ``server_seed``
    is set only once the hand is closed (revealed)."""

    tenant: str
    hand_id: str
    request_id: str | None
    deck: str
    version: str
    commitment: bytes
    sealed_seed: bytes
    client_seeds: tuple[bytes, ...]
    state: StoredHandState
    dealt: int
    created_ms: int
    commit_index: int
    closed_ms: int | None = None
    server_seed: bytes | None = None
    reveal_index: int | None = None
    request_fingerprint: bytes | None = None
    """Digest of what an idempotent open asked for; a retry must match it."""

    def __repr__(self) -> str:  # never print the sealed or revealed seed
        return f"HandRecord(hand_id={self.hand_id!r}, deck={self.deck!r}, state={self.state.name})"


@dataclass(frozen=True)
class NewHand:
    """A hand to create, with its commit log entry (encoded)."""

    record: HandRecord
    """The record; its ``commit_index`` (and ``reveal_index``) are assigned by the engine."""
    log_entry: bytes
    reveal_entry: bytes | None = None
    """For a hand created closed: its reveal entry, appended right after the commit."""


@dataclass(frozen=True)
class HandBatch:
    """Hands of one DealHands slice, stored by one ``create_batch``: what they share, once, and
    what each has, in lists of equal length. Nothing per hand is an object of its own: a batch
    costs a few list items per hand to build and to write.

    ``entries`` are in log order, each hand's commit entry and then, for hands created closed,
    its reveal entry: hand ``i`` gets log index ``base + i * k`` (``k`` 2 when closed, else 1)
    and its reveal the next one. A hand created closed keeps no sealed seed (``b""``): its seed
    is in its row and in the log."""

    tenant: str
    deck: str
    version: str
    client_seeds: tuple[bytes, ...]
    closed: bool
    dealt: int
    created_ms: int
    hand_ids: list[str]
    commitments: list[bytes]
    sealed_seeds: list[bytes]
    server_seeds: list[bytes] | None
    """The revealed seeds, for hands created closed; else None."""
    entries: list[bytes]

    def __len__(self) -> int:
        return len(self.hand_ids)

    @property
    def state(self) -> StoredHandState:
        return StoredHandState.CLOSED if self.closed else StoredHandState.SHUFFLED

    @property
    def step(self) -> int:
        """Log entries per hand."""
        return 2 if self.closed else 1

    def __repr__(self) -> str:  # never print a sealed or revealed seed
        return f"HandBatch({len(self)} hands, deck={self.deck!r}, closed={self.closed})"

    @classmethod
    def of_entries(cls, tenant: str, entries: list[bytes]) -> HandBatch:
        """A batch of no hands: ``entries`` alone, appended in order by ``create_batch`` (which
        returns the first one's index), as durably as any hand's (the co-dealt entries)."""
        return cls(tenant, "", "", (), False, 0, 0, [], [], [], None, entries)


@dataclass(frozen=True)
class Created:
    """What ``create_hands`` did with one NewHand: stored it (``found`` False, the record with its
    log indexes), or found the hand an earlier request with the same request id stored (an
    idempotent retry: that hand's record, ``found`` True)."""

    record: HandRecord
    found: bool = False


@dataclass(frozen=True)
class Change:
    """What an update function decided: the new record and, if any, a log entry
    to append in the same transaction (its index becomes ``reveal_index``). A change that
    reveals a hand says how it ended (``outcome``: ``logentry.CLOSED`` or ``VOIDED``), so
    nobody decodes the entry to learn it."""

    record: HandRecord
    log_entry: bytes | None = None
    outcome: int | None = None


@dataclass(frozen=True)
class StoredCheckpoint:
    """A signed checkpoint as stored: tree size, root hash, the signed note."""

    size: int
    root: bytes
    note: bytes


@dataclass(frozen=True)
class TokenRecord:
    """An API token as stored: never the token, only a digest of its secret part."""

    token_id: str
    tenant: str
    role: str
    """"dealer" (opens and deals hands of its tenant) or "auditor" (reads the log and closed hands)."""
    digest: bytes
    created_ms: int
    label: str = ""
    revoked_ms: int | None = None

    def __repr__(self) -> str:
        return f"TokenRecord(token_id={self.token_id!r}, tenant={self.tenant!r}, role={self.role!r})"


@dataclass
class WriterStats:
    """What an engine's group-commit writer did, for benchmarks and the metrics (no request data).

    Counts only grow. ``lock_wait_seconds`` and ``hashing_seconds`` are measured by
    engines whose writers share a log lock (PostgreSQL); ``None`` where not measured.
    """

    batches: int = 0
    operations: int = 0
    appends: int = 0
    transaction_seconds: float = 0.0
    """Whole transactions as this process sees them, from taking a connection to COMMIT returned."""
    lock_wait_seconds: float | None = None
    """Waiting for the log lock (held by another batch, of this replica or another), server-side."""
    hashing_seconds: float | None = None
    """Holding it while the server hashes the new leaves and stores the hashes. The rest of the
    hold is the entries' and hands' inserts and the COMMIT (WAL flush) that follow."""


def same_request(stored: HandRecord, asked: HandRecord) -> bool:
    """Whether a retried idempotent open asks for what ``stored`` was opened with: its
    request fingerprints (digests) are equal, compared in constant time."""
    return hmac.compare_digest(stored.request_fingerprint or b"", asked.request_fingerprint or b"")


class _Frontier:
    """The right edge of the tree: its complete subtrees as (level, stored index, hash), largest first.

    Both engines keep it, one way each. SQLite holds it in memory (``load`` at
    start, ``push`` on each append), so an append reads nothing from the
    database. PostgreSQL stores it in ``log_head.frontier`` as the hashes alone
    (the levels and indexes follow from the size, one subtree per set bit) and
    appends update it in the database (``fairdeck_append``); there it is
    ``parse``d, for the root and to check the head at start.
    """

    __slots__ = ("stack",)

    def __init__(self, stack: list[tuple[int, int, bytes]]) -> None:
        self.stack = stack

    @classmethod
    def load(cls, size: int, read: Callable[[list[int]], list[bytes]]) -> _Frontier:
        subtrees = merkle.frontier_subtrees(size)
        hashes = read([index for _, index in subtrees]) if subtrees else []
        return cls([(level, index, h) for (level, index), h in zip(subtrees, hashes, strict=True)])

    @classmethod
    def parse(cls, size: int, blob: bytes) -> _Frontier:
        subtrees = merkle.frontier_subtrees(size)
        if len(blob) != merkle.HASH_SIZE * len(subtrees):
            raise refusals.storage_unavailable("the log head's frontier does not fit its size")
        hashes = [blob[i : i + merkle.HASH_SIZE] for i in range(0, len(blob), merkle.HASH_SIZE)]
        stack = [(level, index, h) for (level, index), h in zip(subtrees, hashes, strict=True)]
        return cls(stack)

    def copy(self) -> _Frontier:
        return _Frontier(list(self.stack))

    def read(self, indexes: list[int]) -> list[bytes]:
        known = {index: h for _, index, h in self.stack}
        return [known[i] for i in indexes]

    def append(self, index: int, leaf: bytes) -> list[bytes]:
        """Leaf ``index`` (the tree's size) with hash ``leaf`` joins: its stored hashes (the leaf,
        then each subtree it completes, as ``merkle.stored_hashes_for_append`` gives them), pushed
        here. The append's whole hashing, in the fewest steps: an append completes one subtree
        per trailing one bit of ``index``, and their left siblings are the top of the stack,
        smallest first. Node hash: RFC 9162 section 2.1.1, ``SHA-256(0x01 || left || right)``."""
        stack = self.stack
        out = [leaf]
        h = leaf
        n = index
        while n & 1:
            h = _sha256(b"\x01" + stack.pop()[2] + h).digest()
            out.append(h)
            n >>= 1
        level = len(out) - 1
        stack.append(
            (level, 2 * index - index.bit_count() + level, h)
        )  # merkle.stored_hash_index(0, index) + level
        return out

    def push(self, start: int, hashes: list[bytes]) -> None:
        """Leaf hash and merged subtrees of one append, as written from ``start``."""
        merged = len(hashes) - 1  # the append completed subtrees of levels 1..merged
        if merged:
            del self.stack[-merged:]
        self.stack.append((merged, start + merged, hashes[-1]))

    def root(self) -> bytes:
        if not self.stack:
            return merkle.EMPTY_ROOT
        h = self.stack[-1][2]
        for _, _, left in reversed(self.stack[:-1]):
            h = merkle.node_hash(left, h)
        return h


class LogForkError(Exception):
    """An attempt to sign a second root for a tree size, or a root that is not the stored tree's."""


class Storage(ABC):
    """What the dealer, the log's publishers, the audit servicer, the tokens and the metrics use of
    an engine, all of it: each engine and every wrapper (metrics.MeteredStorage) subclasses it and
    implements every method, so one that is missing fails at construction, not at first use."""

    @property
    @abstractmethod
    def stats(self) -> WriterStats:
        """What the engine's group-commit writer did (the metrics export it)."""

    @abstractmethod
    async def start(self) -> None:
        """Connect, create the schema if missing, and load what the engine keeps in memory."""

    @abstractmethod
    async def create_hands(self, hands: Sequence[NewHand]) -> list[Created]:
        """Insert hands and append their commit entries, atomically and durably; one
        ``Created`` per hand, in order.

        A hand whose (tenant, request_id) already exists is not inserted: the
        stored hand is returned in its place, ``found`` (idempotent open), when the
        request fingerprints match, else REQUEST_ID_REUSED is raised.
        """

    @abstractmethod
    async def create_batch(self, batch: HandBatch) -> int:
        """Insert a batch of hands with their entries, atomically and durably, as ``create_hands``
        does (no request ids: nothing to find again); the log index of its first entry."""

    @abstractmethod
    async def get_hand(self, tenant: str, hand_id: str) -> HandRecord | None:
        """The hand, or None if it does not exist or belongs to another tenant."""

    @abstractmethod
    async def update_hand(
        self, tenant: str, hand_id: str, decide: Callable[[HandRecord], tuple[Change, T]]
    ) -> tuple[HandRecord, T]:
        """Run ``decide`` on the current record inside one transaction and store
        its Change durably; return the stored record and decide's result.
        ``decide`` may raise to abort without writing; an unknown hand raises
        ``refusals.hand_not_found()``."""

    @abstractmethod
    async def update_hands(
        self, tenant: str, hand_ids: Sequence[str], decide: Callable[[HandRecord], tuple[Change, Any]]
    ) -> list[HandRecord | refusals.DealerError]:
        """``update_hand`` for several hands of one tenant as one operation: one transaction,
        ``len(hand_ids)`` hands of its tenant's turn at the writer (the reaper's voids, fair.py).
        Per hand, in order: the stored record, or the refusal that left it unchanged (``decide``
        raised a DealerError, the hand is unknown or its row unreadable); the others are stored
        all the same. Storage failing raises, and nothing of it is stored."""

    @abstractmethod
    async def stale_hands(self, created_before_ms: int, limit: int) -> list[tuple[str, str, int]]:
        """(tenant, hand_id, created_ms) of hands not closed and created before the time, oldest
        first."""

    @abstractmethod
    async def log_size(self) -> int:
        """The number of entries in the transparency log."""

    @abstractmethod
    async def log_entries(self, start: int, end: int) -> list[bytes]:
        """Entries ``start`` to ``end - 1`` (fewer if the log is shorter)."""

    @abstractmethod
    async def log_head(self) -> tuple[int, bytes]:
        """(size, root hash) of the durably stored log."""

    @abstractmethod
    async def checkpoint(self, size: int | None = None) -> StoredCheckpoint | None:
        """The signed checkpoint at ``size`` (None: the latest), if there is one."""

    @abstractmethod
    async def put_checkpoint(self, size: int, root: bytes, note: bytes, time_ms: int) -> StoredCheckpoint:
        """Compare-and-swap the head forward; never two roots for one size."""

    @abstractmethod
    async def add_cosignatures(self, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
        """Append witness cosignature lines to the stored checkpoint of ``size`` (each line once);
        its text and root never change. None if no checkpoint of that size is stored."""

    @abstractmethod
    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size``."""

    @abstractmethod
    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """RFC 9162 consistency proof between two sizes."""

    @abstractmethod
    async def entry_index(self, hand_id: str, reveal: bool) -> int | None:
        """The log index of a hand's commit or reveal entry."""

    @abstractmethod
    async def open_hands(self, tenant: str | None = None) -> int:
        """How many hands are not closed (of one tenant, or of all)."""

    @abstractmethod
    async def put_token(self, token: TokenRecord) -> None:
        """Store a new token durably; an existing token_id raises ValueError."""

    @abstractmethod
    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token with this id, revoked or not."""

    @abstractmethod
    async def list_tokens(self, tenant: str | None = None) -> list[TokenRecord]:
        """Tokens (of one tenant, or all), oldest first."""

    @abstractmethod
    async def revoke_token(self, token_id: str, when_ms: int) -> TokenRecord | None:
        """Mark a token revoked (idempotent: the first time is kept); None if unknown."""

    @abstractmethod
    async def get_meta(self, name: str) -> str | None:
        """A ``fairdeck_meta`` value (the log key's record, the final checkpoint's size), or None."""

    @abstractmethod
    async def set_meta(self, name: str, expected: str | None, value: str) -> bool:
        """Compare-and-swap a ``fairdeck_meta`` value, durably; False if it was not ``expected``."""

    @abstractmethod
    async def sealed_seed_samples(self) -> list[tuple[str, bytes]]:
        """(hand id, sealed seed) of one unrevealed hand per seed key id (bytes 1..5 of the seal):
        what start-up opens to check the seed key (startup.check_store)."""

    @abstractmethod
    def lock_held_for(self) -> float:
        """Seconds this process has held a lock other processes' writers wait for, in the batch
        under way (0: none held; SQLite's writers' lock of ``serve --processes N``)."""

    @abstractmethod
    async def probe(self) -> None:
        """Make one small write durable, or raise STORAGE_UNAVAILABLE: whether storage
        takes writes now. Health calls it while storage is failing (app.py)."""

    @abstractmethod
    def diagnose(self) -> str | None:
        """The last storage failure in one line, with its fix, when the engine can tell (a full
        disk, a read-only file or mount, a lock held outside, damage); None otherwise."""

    @abstractmethod
    def serving(self) -> None:
        """Start-up is over: from now on a failure is logged as it happens. (During start-up the
        refusal says it, once, in one line.)"""

    @abstractmethod
    async def close(self) -> None:
        """Flush and release everything; later calls fail."""
