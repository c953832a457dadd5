"""The witness's durable record: the latest cosigned checkpoint of each log.

One row per origin in an embedded SQLite file. ``advance`` checks the old size and stores the new
checkpoint in one ``BEGIN IMMEDIATE`` transaction (synchronous=FULL), so the check and the update
are atomic, as tlog-witness ("add-checkpoint") requires against the rollback race, and the new
checkpoint is on disk before the witness answers. A witness must never cosign two roots for one
size; a row only ever moves forward.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS latest (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL CHECK (size >= 0),
    root BLOB NOT NULL CHECK (length(root) = 32),
    note BLOB NOT NULL,
    cosigned_at INTEGER NOT NULL
) STRICT
"""


@dataclass(frozen=True, slots=True)
class Latest:
    """The latest checkpoint of a log this witness cosigned."""

    origin: str
    size: int
    root: bytes
    note: bytes
    cosigned_at: int


class StateError(Exception):
    """The state file cannot be opened or written."""


class Conflict(Exception):
    """The old size of a request is not the size this witness last cosigned."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the latest cosigned size is {size}")
        self.size = size


class WitnessState:
    """The SQLite state file; safe to share between the HTTP server's threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(SCHEMA)
        except sqlite3.Error as e:
            raise StateError(f"witness state {path}: {e}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def latest(self, origin: str) -> Latest | None:
        with self._lock:
            row = self._db.execute(
                "SELECT origin, size, root, note, cosigned_at FROM latest WHERE origin = ?", (origin,)
            ).fetchone()
        return None if row is None else Latest(*row)

    def origins(self) -> list[Latest]:
        with self._lock:
            rows = self._db.execute("SELECT origin, size, root, note, cosigned_at FROM latest").fetchall()
        return [Latest(*row) for row in rows]

    def advance(
        self,
        origin: str,
        old_size: int,
        decide: Callable[[Latest | None], Latest],
    ) -> Latest:
        """If the stored size is ``old_size`` (none stored counts as 0), store what ``decide`` makes of
        the stored checkpoint and return it; raise Conflict with the stored size otherwise, and let
        ``decide``'s exception through with nothing stored. Durable on return."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    row = self._db.execute(
                        "SELECT origin, size, root, note, cosigned_at FROM latest WHERE origin = ?", (origin,)
                    ).fetchone()
                    stored = None if row is None else Latest(*row)
                    if (0 if stored is None else stored.size) != old_size:
                        raise Conflict(0 if stored is None else stored.size)
                    new = decide(stored)
                    if new.origin != origin:
                        raise ValueError("decide() must keep the origin")
                    self._db.execute(
                        "INSERT INTO latest (origin, size, root, note, cosigned_at) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root, "
                        "note = excluded.note, cosigned_at = excluded.cosigned_at",
                        (new.origin, new.size, new.root, new.note, new.cosigned_at),
                    )
                    self._db.execute("COMMIT")
                    return new
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise StateError(f"witness state {self.path}: {e}") from None

    def probe(self) -> bool:
        """Whether the state file answers a write (for health)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                return False
        return True
