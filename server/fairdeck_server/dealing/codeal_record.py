"""The identity of a co-dealt hands' file (codeal.db): a random 128-bit record id and the log it belongs to.

Made once, with the file (``serve``'s first start with --codealer, or ``fairdeck init
--codeal-record``), in a one-row table of the file itself, in the transaction that makes the file's
schema (a table without its row is refused), read back checked, and never changed: a copy of the file
keeps the id, so two dealers holding copies present the same id (on PostgreSQL, codeal_claim.py
refuses the second). ``log_key`` is the log's verifier key when the record was made: a record
beside the key file of another log (its current key or one it rotated from) is refused. A file of
an older fairdeck, without the table, is given an id once, at its first start, said in a WARNING,
and marked ``upgraded``: its hands were there before the id, so on PostgreSQL its claim also
claims each of its hands (two copies of one older file would otherwise get two ids). Before that,
its latest hands logged (``public["log"]``) are looked up in the log beside it (``logged_at``): a
hand whose setup is not at its index there was logged to another log, and the file is refused.
"""

from __future__ import annotations

import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
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


RECORD_ID = re.compile(r"[0-9a-f]{32}")
LOG_KEY = re.compile(r"[^\s+]{1,255}\+[0-9a-f]{8}\+[A-Za-z0-9+/]{4,512}={0,2}")
"""A verifier key's shape (name+hash+base64), or '' (not bound yet)."""


class RecordForeign(Exception):
    """The file belongs to another log, or its record is unreadable; the message (one line) names
    the file and the fix."""


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


def read_record(db: sqlite3.Connection, path: Path) -> Record | None:
    """The file's record, None if it has none, or ``RecordForeign`` for a row not of its shape."""
    row = db.execute("SELECT record_id, log_key, upgraded FROM codeal_record WHERE id = 1").fetchone()
    if row is None:
        return None
    record_id, log_key = row[0], row[1]
    if not isinstance(record_id, str) or not RECORD_ID.fullmatch(record_id):
        raise RecordForeign(
            f"co-dealt hands {path}: its record id {_shown(record_id)} is not 32 hex digits: {_FIX}"
        )
    if not isinstance(log_key, str) or (log_key and not LOG_KEY.fullmatch(log_key)):
        raise RecordForeign(
            f"co-dealt hands {path}: its record's log key {_shown(log_key)} is not a verifier key: {_FIX}"
        )
    return Record(record_id, log_key, bool(row[2]))


_FIX = "the file was edited or damaged; put back this dealer's own codeal.db from its backup"


def _shown(value: object) -> str:
    """A value read from the file, repr'd (one line) and cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def open_record(
    db: sqlite3.Connection,
    path: Path,
    *,
    fresh: bool,
    log_keys: Sequence[str],
    logged_at: Callable[[int], bytes | None] | None = None,
) -> Record:
    """The file's record: made for a ``fresh`` file, made once (logged) for an older one, bound to
    ``log_keys[0]`` if it was not bound yet, and refused (``RecordForeign``) if bound to a log
    whose key is none of ``log_keys`` (the log's current key, then those it rotated from).
    ``log_keys`` empty: no log to bind to (a file used outside ``serve``). ``logged_at``: the
    entry at an index of the log beside the file (None: none there), which an older file's hands
    must match before it is given an id (None: not checked)."""
    had = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'codeal_record'").fetchone()
    db.execute(RECORD)
    record = read_record(db, path)
    current = log_keys[0] if log_keys else ""
    if record is None and had is not None:  # made with its row, in one transaction: never without it
        raise RecordForeign(
            f"co-dealt hands {path} has a record table but no record (the file was edited or damaged): "
            "put back this dealer's own codeal.db from its backup; never give it a new identity"
        )
    if record is None:
        if not fresh and logged_at is not None:
            _check_logged_here(db, path, logged_at)
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
            "move this one away with its -wal and -shm and run "
            f"`fairdeck init --codeal-record --data {path.parent}`)"
        )
    return record


CHECKED = 8
"""An older file's hands (the latest logged) looked up in the log beside it at its upgrade."""


def _check_logged_here(db: sqlite3.Connection, path: Path, logged_at: Callable[[int], bytes | None]) -> None:
    """``RecordForeign`` unless each of the older file's latest hands noted as logged has its
    setup entry at the index noted, in the log beside it: else the file came from another log. An
    index noted as a JSON integer outside 0..2**63-1 is refused (damaged); one not an integer at
    all ("1e3", "x") is not a logged index and is skipped, as a hand never logged."""
    from fairdeck.codeal.entries import SETUP, decode_entry
    from fairdeck.codeal.errors import CodealError

    rows = db.execute(  # newest first by rowid: stops after CHECKED hits, no sort, no full scan
        "SELECT hand_id, json_extract(public, '$.log.open') FROM codeal_hands WHERE tenant != '' "
        "AND json_type(public, '$.log.open') = 'integer' ORDER BY rowid DESC LIMIT ?",
        (CHECKED,),
    ).fetchall()
    for hand_id, index in rows:
        if not isinstance(index, int) or not 0 <= index < 2**63:  # past an int64: SQLite gives a float
            raise RecordForeign(
                f"co-dealt hands {path}, made by an older fairdeck (no record id yet), holds hand "
                f"{hand_id}, noted as logged at entry {index!r}, which no log holds: the file is damaged "
                "or was edited; put back this dealer's own codeal.db from its backup"
            )
        entry = logged_at(index)
        try:
            setup = None if entry is None else decode_entry(entry)
        except CodealError:
            setup = None
        if setup is not None and setup.kind == SETUP and setup.hand_id == hand_id:
            continue
        if entry is None:  # never suggest a new record: the hands open in the file would be stranded
            raise RecordForeign(
                f"co-dealt hands {path}, made by an older fairdeck (no record id yet), holds hand {hand_id}, "
                f"logged at entry {index} of its log, but the log of this data dir has no entry {index}: "
                "the log is an older backup than the file, or the file was copied from another dealer's "
                "data dir; put back this data dir's latest log (or this dealer's own codeal.db)"
            )
        raise RecordForeign(
            f"co-dealt hands {path}, made by an older fairdeck (no record id yet), holds hand {hand_id}, "
            f"logged at entry {index} of its log, but the log of this data dir holds another entry at "
            f"{index}: the file was copied from another dealer's data dir (two dealers would hold, and "
            "close, the same hands); put back this dealer's own codeal.db from its backup (or, if it has "
            f"none, move this one away with its -wal and -shm and run `fairdeck init --codeal-record "
            f"--data {path.parent}`)"
        )


def _short(key: str) -> str:
    """A verifier key named by its name and the start of its hash (it is public, but long)."""
    name, _, rest = key.partition("+")
    return f"{name}+{rest[:8]}..." if rest else key
