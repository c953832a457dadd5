"""The identity of a co-dealt hands' file (codeal.db): a random 128-bit record id and the log it belongs to.

Made once, with the file (``serve``'s first start with --codealer, or ``fairdeck init
--codeal-record``), in a one-row table of the file itself, and never changed: a copy of the file
keeps the id, so two dealers holding copies present the same id (on PostgreSQL, codeal_claim.py
refuses the second). ``log_key`` is the log's verifier key when the record was made: a record
beside the key file of another log (its current key or one it rotated from) is refused. A file of
an older fairdeck, without the table, is given an id once, at its first start, said in a WARNING,
and marked ``upgraded``: its hands were there before the id, so on PostgreSQL its first claim also
claims each of its hands (two copies of one older file would otherwise get two ids).
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
RECORD = """CREATE TABLE IF NOT EXISTS codeal_record (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    record_id TEXT NOT NULL,
    log_key TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    upgraded INTEGER NOT NULL
) STRICT"""


class RecordForeign(Exception):
    """The file belongs to another log; the message names the file and the fix."""


@dataclass(frozen=True)
class Record:
    """A codeal.db's identity, as it reads in the file."""

    record_id: str
    """32 hex digits, random, made with the file."""
    log_key: str
    """The verifier key of the log the record was made for ('' while not bound yet)."""
    upgraded: bool
    """Made for an older file that had hands before it had an id."""


def make_record(db: sqlite3.Connection, log_key: str, *, upgraded: bool) -> Record:
    """Give a file its identity (in the caller's transaction or autocommit); never over one."""
    record = Record(secrets.token_hex(16), log_key, upgraded)
    db.execute(
        "INSERT INTO codeal_record (id, record_id, log_key, created_ms, upgraded) VALUES (1, ?, ?, ?, ?)",
        (record.record_id, log_key, int(time.time() * 1000), int(upgraded)),
    )
    return record


def read_record(db: sqlite3.Connection) -> Record | None:
    row = db.execute("SELECT record_id, log_key, upgraded FROM codeal_record WHERE id = 1").fetchone()
    return None if row is None else Record(str(row[0]), str(row[1]), bool(row[2]))


def open_record(db: sqlite3.Connection, path: Path, *, fresh: bool, log_keys: Sequence[str]) -> Record:
    """The file's record: made for a ``fresh`` file, made once (logged) for an older one, bound to
    ``log_keys[0]`` if it was not bound yet, and refused (``RecordForeign``) if bound to a log
    whose key is none of ``log_keys`` (the log's current key, then those it rotated from).
    ``log_keys`` empty: no log to bind to (a file used outside ``serve``)."""
    db.execute(RECORD)
    record = read_record(db)
    current = log_keys[0] if log_keys else ""
    if record is None:
        record = make_record(db, current, upgraded=not fresh)
        if not fresh:
            log.warning(
                "co-dealt hands %s was made by an older fairdeck, without a record id: it is record %s "
                "from now on (given once; a copy of the file made before this start is another record "
                "holding the same hands: never run one)",
                path,
                record.record_id,
            )
        return record
    if not record.log_key and current:
        db.execute("UPDATE codeal_record SET log_key = ? WHERE id = 1", (current,))
        log.info(
            "co-dealt hands %s (record %s) is bound to the log of key %s", path, record.record_id, current
        )
        return Record(record.record_id, current, record.upgraded)
    if record.log_key and log_keys and record.log_key not in log_keys:
        raise RecordForeign(
            f"co-dealt hands {path} (record {record.record_id}) belongs to another log (key "
            f"{_short(record.log_key)}, not this data dir's {_short(current)}): it was copied from another "
            "dealer's data dir; put back this dealer's own codeal.db from its backup (or, if it has none, "
            f"move this one away and run `fairdeck init --codeal-record --data {path.parent}`)"
        )
    return record


def _short(key: str) -> str:
    """A verifier key named by its name and the start of its hash (it is public, but long)."""
    name, _, rest = key.partition("+")
    return f"{name}+{rest[:8]}..." if rest else key
