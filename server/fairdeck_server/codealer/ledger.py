"""The co-dealer's durable record: every hand, its key record, its shuffle, every share it gave.

One SQLite file (WAL, synchronous=FULL, 0600) in the co-dealer's directory. A hand's secrets (its
ElGamal key and seed) are stored sealed by the co-dealer's AES key (vault.SeedVault). A share is
recorded (position -> seat key) in one ``BEGIN IMMEDIATE`` transaction before it is made, so a
restart never gives one position to two seats. ``seals`` keeps each position's one sealed share,
signed statement (9.1) and the SHA-256 of its seat's release token (9.3), written together.
``serve`` opens it with ``create=False``: a file without the hands and shares tables is refused,
never given a fresh schema; an older ledger gets its missing columns at open (a seal with no
release digest is released only by the hold; ``released_ms``: the seed was answered). ``prune``
drops only hands ended before a cutoff, with their shares and seals. ``expire`` ends the hands
announced before a cutoff and not ended (``serve --max-hand-lifetime``) as a reveal does, marked
``expired``, a transaction a batch. ``probe`` is a write of its own (health); ``owner`` the
identity key it belongs to.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from fairdeck_server.storage.sqlite.private_db import make_private, tighten

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS hands (
    hand_id TEXT PRIMARY KEY,
    deck TEXT NOT NULL,
    holder INTEGER NOT NULL,
    holders INTEGER NOT NULL,
    sealed_secrets BLOB NOT NULL,
    key_record BLOB NOT NULL,
    key_signature BLOB NOT NULL,
    key_records BLOB,
    shuffle_inputs BLOB,
    shuffle_record BLOB,
    shuffle_signature BLOB,
    final_deck BLOB,
    revealed INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL,
    revealed_ms INTEGER,
    expired INTEGER NOT NULL DEFAULT 0,
    released_ms INTEGER,
    restored_ms INTEGER
) STRICT""",
    """CREATE TABLE IF NOT EXISTS shares (
    hand_id TEXT NOT NULL REFERENCES hands (hand_id),
    position INTEGER NOT NULL CHECK (position >= 0),
    seat_key BLOB NOT NULL,
    given_ms INTEGER NOT NULL,
    PRIMARY KEY (hand_id, position)
) STRICT""",
    """CREATE TABLE IF NOT EXISTS seals (
    hand_id TEXT NOT NULL REFERENCES hands (hand_id),
    position INTEGER NOT NULL CHECK (position >= 0),
    seat_key BLOB NOT NULL,
    sealed BLOB NOT NULL,
    signature BLOB NOT NULL,
    release_sha256 BLOB,
    PRIMARY KEY (hand_id, position)
) STRICT""",
    "CREATE INDEX IF NOT EXISTS hands_not_ended ON hands (created_ms) WHERE revealed = 0",
    "CREATE TABLE IF NOT EXISTS health_probe "
    "(id INTEGER PRIMARY KEY CHECK (id = 1), written_ms INTEGER NOT NULL) STRICT",
    "CREATE TABLE IF NOT EXISTS owner "
    "(id INTEGER PRIMARY KEY CHECK (id = 1), identity_key BLOB NOT NULL) STRICT",
)
PRUNE_BATCH = 500
"""Hands dropped per transaction: calls wait for one batch at most, never for a whole prune."""

T = TypeVar("T")


class LedgerError(Exception):
    """The ledger file cannot be opened or written."""


@dataclass(frozen=True)
class HandRow:
    """One hand as the co-dealer recorded it."""

    hand_id: str
    deck: str
    holder: int
    holders: int
    sealed_secrets: bytes = field(repr=False)
    key_record: bytes
    key_signature: bytes
    key_records: bytes | None
    shuffle_inputs: bytes | None
    shuffle_record: bytes | None
    shuffle_signature: bytes | None
    final_deck: bytes | None
    revealed: bool
    created_ms: int
    expired: bool = False
    """Ended by the co-dealer's lifetime (``Ledger.expire``), not by the dealer's RevealSeed."""
    released: bool = False
    """Its seed was answered (RevealSeed with its seats' releases, or past the hold)."""


_SELECT_HAND = (
    "SELECT hand_id, deck, holder, holders, sealed_secrets, key_record, key_signature, key_records, "
    "shuffle_inputs, shuffle_record, shuffle_signature, final_deck, revealed, created_ms, expired, "
    "released_ms IS NOT NULL FROM hands WHERE hand_id = ?"
)


class Ledger:
    """The SQLite record; every method is one transaction, safe across threads."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:  # 0600 before SQLite opens it: its -wal and -shm take the file's mode
            if create:
                make_private(path)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise LedgerError(f"co-dealer ledger {path}: {e}") from None
        except OSError as e:
            raise LedgerError(f"co-dealer ledger {path}: {e.strerror or e}") from None
        try:
            if not create:
                _check_tables(self._db, path)
                tighten(path)  # a ledger an older fairdeck made under the umask's mode
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            for statement in SCHEMA:
                self._db.execute(statement)
            _add_revealed_ms(self._db)
            _add_expired(self._db)
            _add_releases(self._db)
        except (sqlite3.Error, LedgerError, OSError) as e:
            self._db.close()
            if isinstance(e, LedgerError):
                raise
            raise LedgerError(f"co-dealer ledger {path}: {getattr(e, 'strerror', None) or e}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def hand(self, hand_id: str) -> HandRow | None:
        return self.transaction(lambda db: _hand(db, hand_id))

    def shares(self, hand_id: str) -> dict[int, bytes]:
        """position -> seat key (empty: public) of every share given for the hand."""
        return self.transaction(lambda db: _shares(db, hand_id))

    def seals(self, hand_id: str) -> dict[int, tuple[bytes, bytes, bytes]]:
        """position -> (seat key, sealed share, seal statement signature) of every position sealed,
        to publish after the hand (spec section 9.1)."""
        return self.transaction(lambda db: read_seals(db, hand_id))

    def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one BEGIN IMMEDIATE transaction, committed (on disk) before returning;
        rolled back if it raises."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    result = work(self._db)
                    self._db.execute("COMMIT")
                    return result
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise LedgerError(f"co-dealer ledger {self.path}: {e}") from None

    def probe(self) -> bool:
        """Whether the ledger takes a write: one row rewritten and committed like any share."""
        try:
            self.transaction(
                lambda db: db.execute(
                    "INSERT INTO health_probe (id, written_ms) VALUES (1, 0) "
                    "ON CONFLICT (id) DO UPDATE SET written_ms = written_ms + 1"
                )
            )
        except LedgerError:
            return False
        return True

    def prune(self, revealed_before_ms: int, committed: Callable[[int], bool] = lambda n: True) -> int:
        """Drop the hands revealed before ``revealed_before_ms``, their shares and seals, in batches of
        ``PRUNE_BATCH``; how many were dropped. A hand not revealed (not ended) is never dropped.
        ``committed(n)`` after each batch's commit; the pass goes on while it returns True."""

        def batch(db: sqlite3.Connection) -> int:
            ids = [
                str(r[0])
                for r in db.execute(
                    "SELECT hand_id FROM hands WHERE revealed = 1 AND revealed_ms < ? LIMIT ?",
                    (revealed_before_ms, PRUNE_BATCH),
                )
            ]
            for hand_id in ids:
                db.execute("DELETE FROM seals WHERE hand_id = ?", (hand_id,))
                db.execute("DELETE FROM shares WHERE hand_id = ?", (hand_id,))
                db.execute("DELETE FROM hands WHERE hand_id = ? AND revealed = 1", (hand_id,))
            return len(ids)

        dropped = 0
        while (n := self.transaction(batch)) > 0:
            dropped += n
            if not committed(n):
                break
        return dropped

    def expire(
        self, created_before_ms: int, now_ms: int, committed: Callable[[int], bool] = lambda n: True
    ) -> int:
        """End the hands announced before ``created_before_ms`` and not ended, in batches of
        ``PRUNE_BATCH``: revealed (no position is given from then on; the seed and the public
        shares of dealt positions still answer the dealer's close), ``expired``, ``revealed_ms``
        now (retention counts from the end); how many were ended. ``committed(n)`` after each
        batch's commit (a later batch's LedgerError does not undo those ended before it); the
        sweep goes on while it returns True."""

        def batch(db: sqlite3.Connection) -> int:
            return db.execute(
                "UPDATE hands SET revealed = 1, revealed_ms = ?, expired = 1 WHERE hand_id IN ("
                "SELECT hand_id FROM hands WHERE revealed = 0 AND created_ms < ? LIMIT ?)",
                (now_ms, created_before_ms, PRUNE_BATCH),
            ).rowcount

        ended = 0
        while (n := self.transaction(batch)) > 0:
            ended += n
            if not committed(n):
                break
        return ended

    def end_open_hands(self, now_ms: int) -> int:
        """End every hand not ended (after a restore from backup): how many. An ended hand gives no
        share of a position its record does not hold, so none the backup forgot goes out again."""
        return self.transaction(
            lambda db: (
                db.execute(
                    "UPDATE hands SET revealed = 1, revealed_ms = ?, restored_ms = ? WHERE revealed = 0",
                    (now_ms, now_ms),
                ).rowcount
            )
        )

    def owner(self) -> bytes | None:
        """The identity key of the co-dealer this ledger belongs to (None: made before it was kept)."""
        row = self.transaction(lambda db: db.execute("SELECT identity_key FROM owner").fetchone())
        return None if row is None else bytes(row[0])

    def claim(self, identity_key: bytes) -> None:
        """Record the co-dealer this ledger belongs to; an owner already recorded is kept."""
        self.transaction(
            lambda db: db.execute(
                "INSERT OR IGNORE INTO owner (id, identity_key) VALUES (1, ?)", (identity_key,)
            )
        )

    def newest_hand(self) -> HandRow | None:
        """The hand announced last, to check the identity and secrets key against at start."""
        return self.transaction(lambda db: _hand_where(db, "rowid = (SELECT max(rowid) FROM hands)", ()))

    def counts(self) -> tuple[int, int]:
        """(hands, shares) the ledger holds."""
        return self.transaction(
            lambda db: (
                int(db.execute("SELECT count(*) FROM hands").fetchone()[0]),
                int(db.execute("SELECT count(*) FROM shares").fetchone()[0]),
            )
        )


def _check_tables(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a co-dealer ledger (an empty file reads as an empty database)."""
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    if not {"hands", "shares"} <= {str(r[0]) for r in rows}:
        raise LedgerError(
            f"co-dealer ledger {path} is empty or not a co-dealer ledger: restore it from backup "
            "(a co-dealer that forgot what it shared could give a card to two seats)"
        )


def _add_revealed_ms(db: sqlite3.Connection) -> None:
    """A ledger made before retention gets ``revealed_ms``; its hands already revealed count as
    revealed now, so they are kept a whole retention window from the upgrade."""
    columns = {str(r[1]) for r in db.execute("PRAGMA table_info(hands)")}
    if "revealed_ms" not in columns:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ALTER TABLE hands ADD COLUMN revealed_ms INTEGER")
        db.execute("UPDATE hands SET revealed_ms = ? WHERE revealed = 1", (time.time_ns() // 1_000_000,))
        db.execute("COMMIT")


def _add_expired(db: sqlite3.Connection) -> None:
    """A ledger made before the co-dealer's lifetime gets ``expired`` (0: every hand it ended
    was ended by a RevealSeed)."""
    columns = {str(r[1]) for r in db.execute("PRAGMA table_info(hands)")}
    if "expired" not in columns:
        db.execute("ALTER TABLE hands ADD COLUMN expired INTEGER NOT NULL DEFAULT 0")


def _add_releases(db: sqlite3.Connection) -> None:
    """A ledger made before seat releases gets ``seals.release_sha256`` (NULL: the seal was made
    before releases; its seat can release the hand only through the hold), ``released_ms`` and
    ``restored_ms`` (NULL: not ended by ``codealer restored``)."""
    if "release_sha256" not in {str(r[1]) for r in db.execute("PRAGMA table_info(seals)")}:
        db.execute("ALTER TABLE seals ADD COLUMN release_sha256 BLOB")
    columns = {str(r[1]) for r in db.execute("PRAGMA table_info(hands)")}
    if "released_ms" not in columns:
        db.execute("ALTER TABLE hands ADD COLUMN released_ms INTEGER")
    if "restored_ms" not in columns:
        db.execute("ALTER TABLE hands ADD COLUMN restored_ms INTEGER")


def _hand(db: sqlite3.Connection, hand_id: str) -> HandRow | None:
    return _hand_where(db, "hand_id = ?", (hand_id,))


def _hand_where(db: sqlite3.Connection, where: str, args: tuple[str, ...]) -> HandRow | None:
    row = db.execute(_SELECT_HAND.replace("hand_id = ?", where), args).fetchone()
    if row is None:
        return None
    values = list(row)
    values[12] = bool(values[12])
    values[14] = bool(values[14])
    values[15] = bool(values[15])
    return HandRow(*values)


def _shares(db: sqlite3.Connection, hand_id: str) -> dict[int, bytes]:
    rows = db.execute("SELECT position, seat_key FROM shares WHERE hand_id = ?", (hand_id,)).fetchall()
    return {int(p): bytes(k) for p, k in rows}


def read_hand(db: sqlite3.Connection, hand_id: str) -> HandRow | None:
    """The hand inside a transaction."""
    return _hand(db, hand_id)


def read_shares(db: sqlite3.Connection, hand_id: str) -> dict[int, bytes]:
    """The shares given, inside a transaction."""
    return _shares(db, hand_id)


def read_seals(db: sqlite3.Connection, hand_id: str) -> dict[int, tuple[bytes, bytes, bytes]]:
    """position -> (seat key, sealed share, signature) of the seals made, inside a transaction."""
    rows = db.execute(
        "SELECT position, seat_key, sealed, signature FROM seals WHERE hand_id = ?", (hand_id,)
    ).fetchall()
    return {int(p): (bytes(k), bytes(s), bytes(g)) for p, k, s, g in rows}


@dataclass(frozen=True)
class Releases:
    """What the seat releases of a hand are checked against (spec section 9.3)."""

    last_sealed_ms: int | None
    """When its last sealed share was recorded (the hold counts from it: a public share, or one
    long before the seats' cards, must not age the hand past their hold); None: none yet."""
    digests: dict[bytes, list[bytes | None]]
    """Seat key -> the release digest of each position sealed to it (None: sealed before releases)."""
    restored: bool = False
    """Ended by ``codealer restored``: the backup may lack seats it sealed to, so only the hold
    (counted from the restore at the earliest) answers its seed, whatever releases come."""


def read_releases(db: sqlite3.Connection, hand_id: str) -> Releases:
    """The hand's release state, inside a transaction: every seat key given a sealed share."""
    last = db.execute(
        "SELECT max(given_ms) FROM shares WHERE hand_id = ? AND length(seat_key) > 0", (hand_id,)
    ).fetchone()[0]
    row = db.execute("SELECT restored_ms FROM hands WHERE hand_id = ?", (hand_id,)).fetchone()
    restored = None if row is None else row[0]
    if restored is not None:  # the restored ledger may have forgotten later seals: the hold from it
        last = int(restored) if last is None else max(int(last), int(restored))
    digests: dict[bytes, list[bytes | None]] = {}
    for (key,) in db.execute(
        "SELECT DISTINCT seat_key FROM shares WHERE hand_id = ? AND length(seat_key) > 0", (hand_id,)
    ):
        digests[bytes(key)] = []
    for key, digest in db.execute("SELECT seat_key, release_sha256 FROM seals WHERE hand_id = ?", (hand_id,)):
        digests.setdefault(bytes(key), []).append(None if digest is None else bytes(digest))
    return Releases(None if last is None else int(last), digests, restored is not None)
