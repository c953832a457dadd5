"""The storage interface and the records it keeps.

Engines implement ``Storage``; the dealer's logic stays out of them. An
update runs a pure function of the current record inside the engine's
transaction, so each engine provides atomicity its own way (one writer thread
for SQLite, row locks for a server database) while the rules live in one
place (dealer.py). Nothing an engine returns is acknowledged before it is
durable. What both engines do alike is written once, here: the row codecs,
the tree's frontier and the idempotent-open comparison.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fairdeck.core.commitment import COMMITMENT_BYTES
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.encoding import lp, u32
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import MAX_CLIENT_SEEDS, check_hand_id
from fairdeck.core.versions import check_version
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


HAND_FIELDS = (
    "hand_id", "tenant", "request_id", "deck", "version", "commitment", "sealed_seed", "client_seeds",
    "state", "dealt", "created_ms", "commit_index", "closed_ms", "server_seed", "reveal_index", "request_fp",
)  # fmt: skip
"""The ``hands`` columns (both engines' schemas), in the order of a hand row: what ``hand_row`` and
``batch_hand_rows`` build and ``hand_record`` reads."""
HAND_COLUMNS = ", ".join(HAND_FIELDS)
"""``HAND_FIELDS`` as SQL's column list."""
HandRow = tuple[Any, ...]
"""The values of ``HAND_FIELDS`` for one hand, as a row of either engine holds them."""
TOKEN_COLUMNS = "token_id, tenant, role, digest, created_ms, label, revoked_ms"  # noqa: S105 - column names
"""The ``tokens`` columns in the order ``token_record`` reads them."""


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def hand_record(row: Sequence[Any]) -> HandRecord:
    """A ``SELECT HAND_COLUMNS`` row of either engine, checked: a row that is not a hand this dealer
    could have written (a bad sector, a bad restore, a migration's bug: nothing ``quick_check``
    sees) raises HAND_UNREADABLE naming the hand and the column, never its content."""
    hand_id = _shown_id(row[0])
    column = "deck"
    try:
        if row[3] not in SPEC_NAMES:
            raise ValueError
        column = "version"
        check_version(row[4])
        column = "commitment"
        if len(bytes(row[5])) != COMMITMENT_BYTES:
            raise ValueError
        column = "client_seeds"
        seeds = decode_seeds(bytes(row[7]))
        column = "state"
        state = StoredHandState(row[8])
        column = "dealt"
        dealt = int(row[9])
        if not 0 <= dealt <= DeckSpec.parse(row[3]).size:
            raise ValueError
        column = "created_ms, commit_index or closed_ms"
        return HandRecord(
            hand_id=row[0],
            tenant=row[1],
            request_id=row[2],
            deck=row[3],
            version=row[4],
            commitment=bytes(row[5]),
            sealed_seed=bytes(row[6]),
            client_seeds=seeds,
            state=state,
            dealt=dealt,
            created_ms=int(row[10]),
            commit_index=int(row[11]),
            closed_ms=_int(row[12]),
            server_seed=_bytes(row[13]),
            reveal_index=_int(row[14]),
            request_fingerprint=_bytes(row[15]),
        )
    except (ValueError, TypeError, InvalidInput):
        raise refusals.hand_unreadable(hand_id, column) from None


def _shown_id(value: Any) -> str:
    """A hand id fit for a log line: the id when it follows the hand-id rule, else ``?``."""
    try:
        check_hand_id(value)
    except (InvalidInput, TypeError, AttributeError):
        return "?"
    return str(value)


def hand_row(r: HandRecord, commit_index: int, reveal_index: int | None) -> HandRow:
    """The row of a new hand, at its log indexes (an engine may pass positions it offsets later):
    what ``hand_record`` reads back."""
    return (
        r.hand_id, r.tenant, r.request_id, r.deck, r.version, r.commitment, r.sealed_seed,
        encode_seeds(r.client_seeds), int(r.state), r.dealt, r.created_ms, commit_index, r.closed_ms,
        r.server_seed, reveal_index, r.request_fingerprint,
    )  # fmt: skip


def batch_hand_rows(batch: HandBatch, first: int) -> list[HandRow]:
    """The rows of a batch's hands, its first entry at log index ``first`` (hand ``i``'s commit at
    ``first + i * batch.step``, its reveal next when created closed). What a batch's hands share is
    read once; a hand costs one tuple."""
    k, closed = batch.step, batch.closed
    tenant, deck, version, dealt, created = (
        batch.tenant,
        batch.deck,
        batch.version,
        batch.dealt,
        batch.created_ms,
    )
    seeds = encode_seeds(batch.client_seeds)
    state, closed_ms = int(batch.state), created if closed else None
    revealed: Sequence[bytes | None] = (
        batch.server_seeds if batch.server_seeds is not None else [None] * len(batch)
    )
    commitments, sealed = batch.commitments, batch.sealed_seeds
    rows: list[HandRow] = []
    add = rows.append
    for i, hand_id in enumerate(batch.hand_ids):
        index = first + i * k
        add(
            (
                hand_id, tenant, None, deck, version, commitments[i], sealed[i], seeds,
                state, dealt, created, index, closed_ms, revealed[i], index + 1 if closed else None, None,
            )
        )  # fmt: skip
    return rows


def token_record(row: Sequence[Any]) -> TokenRecord:
    """A ``SELECT TOKEN_COLUMNS`` row of either engine."""
    return TokenRecord(row[0], row[1], row[2], bytes(row[3]), int(row[4]), row[5], _int(row[6]))


def token_row(token: TokenRecord) -> tuple[Any, ...]:
    """The values of ``TOKEN_COLUMNS`` for an INSERT: what ``token_record`` reads back."""
    return (
        token.token_id,
        token.tenant,
        token.role,
        token.digest,
        token.created_ms,
        token.label,
        token.revoked_ms,
    )


def same_request(stored: HandRecord, asked: HandRecord) -> bool:
    """Whether a retried idempotent open asks for what ``stored`` was opened with: its
    request fingerprints (digests) are equal, compared in constant time."""
    return hmac.compare_digest(stored.request_fingerprint or b"", asked.request_fingerprint or b"")


def entries_in_order(rows: Iterable[tuple[int, Any]]) -> Iterator[bytes]:
    """The entries of ``SELECT idx, entry FROM log_entries ORDER BY idx``, for the
    read-only audits; a gap raises (an auditor would see a missing entry as empty)."""
    for expected, (idx, entry) in enumerate(rows):
        if idx != expected:
            raise ValueError(f"log entry {expected} is missing (next stored index is {idx})")
        yield bytes(entry)


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


def encode_seeds(seeds: Sequence[bytes]) -> bytes:
    """Client seeds as one column: ``u32(k) || lp(s1) .. lp(sk)``."""
    return u32(len(seeds)) + b"".join(lp(s) for s in seeds)


def decode_seeds(data: bytes) -> tuple[bytes, ...]:
    """The client seeds of ``encode_seeds``; ValueError for anything else. Bounded by the column's
    own size before it loops: a count of 4 billion in a damaged row is refused, not iterated."""
    if len(data) < 4:
        raise ValueError("corrupt client seed column")
    count, pos, out = int.from_bytes(data[:4], "big"), 4, []
    if count > min(MAX_CLIENT_SEEDS, (len(data) - 4) // 4):
        raise ValueError("corrupt client seed column")
    for _ in range(count):
        if pos + 4 > len(data):
            raise ValueError("corrupt client seed column")
        n = int.from_bytes(data[pos : pos + 4], "big")
        if pos + 4 + n > len(data):
            raise ValueError("corrupt client seed column")
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    if pos != len(data):
        raise ValueError("corrupt client seed column")
    return tuple(out)
