"""The read-only audit reader: a data dir's SQLite log for ``fairdeck audit --data``.

It opens the file read-only (never creates it), writes nothing and holds no lock long: entries are
read in pages, each its own short read transaction, so a long audit never holds a snapshot that
keeps the dealer's WAL from restarting (entries never change once written, so pages agree).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from fairdeck.log.audit import LogUnreadable
from fairdeck_server.refusals import RESTORE
from fairdeck_server.storage.base import entries_in_order
from fairdeck_server.storage.sqlite.schema import explain, is_damage

PAGE = 5000
"""Entries per read transaction."""


def read_log(path: Path) -> tuple[int, list[bytes], Iterator[bytes]]:
    """Read-only view of a data dir's log for ``fairdeck audit --data``.

    Returns (entry count, every signed checkpoint note, an iterator over the
    entries in index order). Nothing is written, nothing is created (the file
    is opened read-only, never made), and no lock is held long. A missing,
    corrupt or foreign database raises ``LogUnreadable`` naming the file and
    the fix, also from the iterator when the damage lies further in the file.
    """
    if not path.is_file():
        raise LogUnreadable(
            f"no dealer database at {path}: --data must name the data dir of `fairdeck serve` "
            f"(the one holding {path.name})"
        )
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise _unreadable(path, e) from None
    try:
        count = conn.execute("SELECT COUNT(*) FROM log_entries").fetchone()[0]
        notes = [bytes(r[0]) for r in conn.execute("SELECT note FROM checkpoints ORDER BY size")]
        notes += [
            str(r[0]).encode()
            for r in conn.execute(
                "SELECT value FROM fairdeck_meta WHERE name LIKE 'log_key_rotation/%' ORDER BY name"
            )
        ]
    except sqlite3.Error as e:
        conn.close()
        raise _unreadable(path, e) from None

    def pages() -> Iterator[tuple[int, bytes]]:
        start = 0
        while True:
            page = conn.execute(
                "SELECT idx, entry FROM log_entries WHERE idx >= ? ORDER BY idx LIMIT ?", (start, PAGE)
            ).fetchall()  # all of it: the read transaction ends here
            yield from page
            if len(page) < PAGE:
                return
            start = int(page[-1][0]) + 1

    def entries() -> Iterator[bytes]:
        try:
            yield from entries_in_order(pages())
        except sqlite3.Error as e:
            raise _unreadable(path, e) from None
        finally:
            conn.close()

    return count, notes, entries()


def _unreadable(path: Path, error: sqlite3.Error) -> LogUnreadable:
    # sqlite's own words ("file is not a database", "database disk image is malformed",
    # "no such table: log_entries") say which of corrupt or foreign it is.
    if not is_damage(error):  # a lock, a mode, a mount: the file is fine, say what it is
        return LogUnreadable(f"cannot read the dealer database: {explain(path, error)}")
    return LogUnreadable(
        f"cannot read the dealer database {path}: {error}; audit the live dealer with --target, or {RESTORE}"
    )
