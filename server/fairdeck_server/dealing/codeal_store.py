"""The dealer's record of its co-dealt hands: one SQLite file, DATA_DIR/codeal.db.

A pooled deck (opened and shuffled ahead, for a tenant, not yet dealt) is a row whose ``tenant``
is empty and ``pool_tenant`` names the tenant; ``take`` hands one over by setting its tenant in
one UPDATE, so a deck is taken once, durably, in the same write that makes it the tenant's hand;
a deck pooled past the hand lifetime is retired (``closed_ms`` set, never taken) and dropped once
its co-dealer ended it (codeal_voids.py).
A row holds the hand's public record (key records, shuffle records, the co-dealer's identity
signatures, the dealt positions with the seat each went to, and after the close the shares and
seeds) as JSON, and the dealer's own per-hand key and seed sealed by the dealer's seed vault,
bound to the hand id. Nothing of the co-dealer's secrets is ever here. Writes are one
transaction each, synchronous=FULL: on disk before the dealer answers. The file's identity (its
record id and the log it belongs to) is codeal_record.py's, made with the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairdeck_server.dealing.codeal_record import Record, RecordForeign, open_record
from fairdeck_server.storage.sqlite.private_db import make_private

SCHEMA = """CREATE TABLE IF NOT EXISTS codeal_hands (
    hand_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    deck TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    closed_ms INTEGER,
    sealed_secrets BLOB NOT NULL,
    public TEXT NOT NULL,
    pool_tenant TEXT NOT NULL DEFAULT ''
) STRICT"""
SEATS = """CREATE TABLE IF NOT EXISTS codeal_seats (
    hand_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    seat_key BLOB NOT NULL,
    PRIMARY KEY (hand_id, position)
) STRICT"""
POOL_INDEX = "CREATE INDEX IF NOT EXISTS codeal_pool ON codeal_hands (pool_tenant, deck) WHERE tenant = ''"
OPEN_INDEX = "CREATE INDEX IF NOT EXISTS codeal_open ON codeal_hands (created_ms) WHERE closed_ms IS NULL"
_UNLOGGED = "tenant != '' AND json_extract(public, '$.log.close') IS NULL"
"""A hand whose closing entries are not noted as logged (codeal_log.CLOSED)."""
UNLOGGED_INDEX = f"CREATE INDEX IF NOT EXISTS codeal_unlogged ON codeal_hands (closed_ms) WHERE {_UNLOGGED}"
PROBE = (
    "CREATE TABLE IF NOT EXISTS codeal_probe (id INTEGER PRIMARY KEY CHECK (id = 1), written INTEGER) STRICT"
)
_COLUMNS = "hand_id, tenant, deck, created_ms, closed_ms, sealed_secrets, public, pool_tenant"


class CodealStoreError(Exception):
    """The co-dealt hands' file cannot be read or written."""


class CodealStoreLost(CodealStoreError):
    """The co-dealt hands' file is there but empty or another database: never given a fresh schema
    (the open hands' sealed keys and seeds would be forgotten); its message says the fix."""


@dataclass
class CodealRow:
    """A co-dealt hand as the dealer recorded it; ``public`` is JSON-ready (hex strings)."""

    hand_id: str
    tenant: str
    deck: str
    created_ms: int
    closed_ms: int | None
    sealed_secrets: bytes = field(repr=False)
    public: dict[str, Any] = field(default_factory=dict)
    pool_tenant: str = ""
    """For a pooled deck (``tenant`` empty): the tenant it is kept for."""


class CodealStore:
    def __init__(
        self,
        path: Path,
        log_keys: Sequence[str] = (),
        logged_at: Callable[[int], bytes | None] | None = None,
    ) -> None:
        """Open (or make) the file; ``log_keys``: the dealer's log's verifier keys, current first,
        that its record may belong to, and ``logged_at`` its entries, which an older file's hands
        must match (codeal_record.open_record; empty, None: not checked)."""
        self.path = path
        self._lock = threading.Lock()
        fresh = not _check_not_lost(path)
        try:  # 0600 before SQLite opens it: its -wal and -shm take the file's mode
            if fresh:  # made here, never through a link (nor over a file made meanwhile)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                os.close(os.open(path, flags, 0o600))
            make_private(path)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("BEGIN IMMEDIATE")  # a new file: its schema and its record, at once
            self._db.execute(SCHEMA)
            self._db.execute(POOL_INDEX)
            self._db.execute(OPEN_INDEX)
            self._db.execute(UNLOGGED_INDEX)
            self._db.execute(SEATS)
            self._db.execute(PROBE)
            self.record: Record = open_record(
                self._db, path, fresh=fresh, log_keys=log_keys, logged_at=logged_at
            )
            self._db.execute("COMMIT")
        except RecordForeign as e:
            self._db.close()
            raise CodealStoreLost(str(e)) from None
        except sqlite3.Error as e:
            raise CodealStoreError(f"co-dealt hands {path}: {e}") from None
        except OSError as e:
            raise CodealStoreError(f"co-dealt hands {path}: {e.strerror or e}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def hand_ids(self) -> list[str]:
        """Every hand id the file holds (hands and pooled decks): what an upgraded record claims."""
        with self._lock:
            try:
                rows = self._db.execute("SELECT hand_id FROM codeal_hands ORDER BY hand_id").fetchall()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return [str(h) for (h,) in rows]

    def probe(self) -> bool:
        """Whether the file takes a write: one row rewritten and committed (co-dealt health)."""
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO codeal_probe (id, written) VALUES (1, 0) "
                    "ON CONFLICT (id) DO UPDATE SET written = written + 1"
                )
            except sqlite3.Error:
                return False
        return True

    def get(self, hand_id: str) -> CodealRow | None:
        with self._lock:
            try:
                row = self._db.execute(
                    f"SELECT {_COLUMNS} FROM codeal_hands WHERE hand_id = ?",  # noqa: S608
                    (hand_id,),
                ).fetchone()
                seats = self._db.execute(
                    "SELECT seat_key FROM codeal_seats WHERE hand_id = ? ORDER BY position", (hand_id,)
                ).fetchall()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        if row is None:
            return None
        hand = _row(row)
        hand.public["seats"] = [bytes(k).hex() for (k,) in seats]
        return hand

    def add_seats(self, hand_id: str, first: int, seat_keys: list[bytes]) -> None:
        """Positions ``first ..`` were dealt to these seat keys (empty: public), durably."""
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    self._db.executemany(
                        "INSERT INTO codeal_seats (hand_id, position, seat_key) VALUES (?, ?, ?)",
                        [(hand_id, first + i, key) for i, key in enumerate(seat_keys)],
                    )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None

    def put(self, row: CodealRow, *, new: bool = False) -> None:
        """Insert (``new``) or replace the row, durably."""
        verb = "INSERT" if new else "REPLACE"
        with self._lock:
            try:
                self._db.execute(
                    f"{verb} INTO codeal_hands ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        row.hand_id,
                        row.tenant,
                        row.deck,
                        row.created_ms,
                        row.closed_ms,
                        row.sealed_secrets,
                        json.dumps({k: v for k, v in row.public.items() if k != "seats"}, sort_keys=True),
                        row.pool_tenant,
                    ),
                )
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None

    def take(self, tenant: str, deck: str, now_ms: int, hand_id: str = "") -> CodealRow | None:
        """The oldest deck pooled for ``tenant`` (or the pooled deck ``hand_id``), now its hand (one
        UPDATE: taken once); None if the pool has none (or another open took it)."""
        with self._lock:
            try:
                row = self._db.execute(
                    f"UPDATE codeal_hands SET tenant = pool_tenant, created_ms = ? WHERE hand_id = ("  # noqa: S608
                    "SELECT hand_id FROM codeal_hands WHERE tenant = '' AND closed_ms IS NULL "
                    "AND pool_tenant = ? AND deck = ? AND (? = '' OR hand_id = ?) "
                    f"ORDER BY created_ms, hand_id LIMIT 1) RETURNING {_COLUMNS}",
                    (now_ms, tenant, deck, hand_id, hand_id),
                ).fetchone()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return None if row is None else _row(row)

    def pooled(self, tenant: str, deck: str) -> int:
        """How many decks are pooled for ``tenant``."""
        with self._lock:
            try:
                (count,) = self._db.execute(
                    "SELECT count(*) FROM codeal_hands WHERE tenant = '' AND closed_ms IS NULL "
                    "AND pool_tenant = ? AND deck = ?",
                    (tenant, deck),
                ).fetchone()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return int(count)

    def stale(self, before_ms: int, limit: int) -> list[tuple[str, str, str, str]]:
        """Up to ``limit`` rows not closed made (a hand: taken) before ``before_ms``, oldest first:
        (tenant, pool tenant, hand id, deck); a pooled deck has tenant ''."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT tenant, pool_tenant, hand_id, deck FROM codeal_hands "
                    "WHERE closed_ms IS NULL AND created_ms < ? ORDER BY created_ms, hand_id LIMIT ?",
                    (before_ms, limit),
                ).fetchall()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return [(str(t), str(p), str(h), str(d)) for t, p, h, d in rows]

    def unlogged(self, closed_before_ms: int, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` hands closed before ``closed_before_ms`` whose closing entries are not
        noted as logged (the log refused them, and no CloseHand came again): (tenant, hand id)."""
        with self._lock:
            try:
                rows = self._db.execute(
                    f"SELECT tenant, hand_id FROM codeal_hands WHERE {_UNLOGGED} "  # noqa: S608
                    "AND closed_ms < ? ORDER BY closed_ms LIMIT ?",
                    (closed_before_ms, limit),
                ).fetchall()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return [(str(t), str(h)) for t, h in rows]

    def retire_pooled(self, hand_id: str, now_ms: int) -> bool:
        """Take a pooled deck out of the pool for good (``take`` never hands it over again);
        False if it was taken for a hand meanwhile. The co-dealer is told to end it next."""
        with self._lock:
            try:
                cursor = self._db.execute(
                    "UPDATE codeal_hands SET closed_ms = ? WHERE hand_id = ? AND tenant = '' "
                    "AND closed_ms IS NULL",
                    (now_ms, hand_id),
                )
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return cursor.rowcount == 1

    def oldest_pooled(self, tenant: str, deck: str) -> str | None:
        """The hand id of the deck ``take`` would hand over now, not taken; None if none is pooled."""
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT hand_id FROM codeal_hands WHERE tenant = '' AND closed_ms IS NULL "
                    "AND pool_tenant = ? AND deck = ? ORDER BY created_ms, hand_id LIMIT 1",
                    (tenant, deck),
                ).fetchone()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return None if row is None else str(row[0])

    def drop_pooled(self, hand_id: str) -> None:
        """Forget a pooled deck, never taken, that its co-dealer ended (never a hand, never logged)."""
        with self._lock:
            try:
                self._db.execute(
                    "DELETE FROM codeal_hands WHERE hand_id = ? AND tenant = '' AND closed_ms IS NULL",
                    (hand_id,),
                )
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None

    def retired(self, limit: int) -> list[str]:
        """Pooled decks retired whose co-dealer has not been told yet (``drop_retired`` not done)."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT hand_id FROM codeal_hands WHERE tenant = '' AND closed_ms IS NOT NULL LIMIT ?",
                    (limit,),
                ).fetchall()
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None
        return [str(h) for (h,) in rows]

    def drop_retired(self, hand_id: str) -> None:
        """Forget a retired pooled deck (never a hand, never logged) once its co-dealer ended it."""
        with self._lock:
            try:
                self._db.execute(
                    "DELETE FROM codeal_hands WHERE hand_id = ? AND tenant = '' AND closed_ms IS NOT NULL",
                    (hand_id,),
                )
            except sqlite3.Error as e:
                raise CodealStoreError(f"co-dealt hands {self.path}: {e}") from None


def _row(row: Any) -> CodealRow:
    public = json.loads(row[6])
    public.setdefault("seats", [])
    return CodealRow(row[0], row[1], row[2], row[3], row[4], row[5], public, row[7])


def check_record(path: Path, first_entry: Callable[[], tuple[int | None, str]]) -> None:
    """Refuse a missing codeal.db when the dealer's log holds a co-dealt entry: the file was lost
    (a first start has none). ``first_entry``: that entry's index or None, and how to name the log's
    database; read only when the file is missing. Never made here: ``CodealStore`` makes it."""
    _not_dangling(path)
    if path.exists():
        return
    index, where = first_entry()
    if index is None:
        return
    raise CodealStoreLost(
        f"co-dealt hands {path} is missing but the log of {where} holds co-dealt hands (entry {index}): "
        "restore it from backup (the latest: it holds the dealer's sealed key and seed of every co-dealt "
        "hand); to start a new record knowingly (this dealer's open co-dealt hands can then "
        f"never be closed), run `fairdeck init --codeal-record --data {path.parent}`"
    )


def create_record(path: Path, log_keys: Sequence[str] = ()) -> Record:
    """``fairdeck init --codeal-record``: a new, empty codeal.db, knowingly, with a new record id
    (bound to the log of ``log_keys``, if given); never over one."""
    if path.exists() or path.is_symlink():
        raise CodealStoreError(f"co-dealt hands {path} already exists; fairdeck init never replaces it")
    store = CodealStore(path, log_keys)
    store.close()
    return store.record


def _check_not_lost(path: Path) -> bool:
    """Refuse a codeal.db emptied (a failed restore, a full disk) or swapped for another SQLite
    file; a missing one is made (the first start with --codealer, after ``check_record``). True if
    the file is there (and ours)."""
    _not_dangling(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    except OSError as e:
        raise CodealStoreError(f"co-dealt hands {path}: {e.strerror or e}") from None
    fix = (
        "restore it from backup: it holds the dealer's sealed key and seed of every co-dealt hand "
        "(remove it only if this dealer never opened one)"
    )
    if size == 0:
        raise CodealStoreLost(f"co-dealt hands {path} is empty: {fix}")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.Error as e:
        raise CodealStoreLost(f"co-dealt hands {path}: {e}: {fix}") from None
    if "codeal_hands" not in tables:
        raise CodealStoreLost(f"co-dealt hands {path} is not the dealer's co-dealt hands file: {fix}")
    return True


def _not_dangling(path: Path) -> None:
    """Refuse a codeal.db that is a symlink to nothing (never read as missing, never made through:
    the file it named may be on a disk not mounted), one that is not a regular file (a FIFO, a
    directory), and a missing one whose -wal or -shm is there (moved without them)."""
    if path.is_symlink() and not path.exists():
        raise CodealStoreLost(
            f"co-dealt hands {path} is a symbolic link to {os.readlink(path)!r}, which is missing: mount "
            "or restore the file it points to (never make a new one through the link)"
        )
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        left = [f"{path}{end}" for end in ("-wal", "-shm") if Path(f"{path}{end}").exists()]
        if left:
            raise CodealStoreLost(
                f"co-dealt hands {path} is missing but {' and '.join(left)} is there: the file was moved "
                "without its -wal and -shm (its latest hands are in them); put codeal.db back beside "
                "them, and move the three only together"
            ) from None
        return
    except OSError:
        return  # said by the caller's own stat
    if not stat.S_ISREG(mode):
        raise CodealStoreLost(
            f"co-dealt hands {path} is not a regular file ({_kind(mode)}): put back this dealer's "
            "codeal.db from its backup in its place"
        )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a directory" if stat.S_ISDIR(mode) else "a device or socket"
