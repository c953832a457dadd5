"""Every statement that writes an SQLite database, each a function of the writer thread's
connection (batches.SqliteWriter runs them, in its transactions), and the log's tail they append
to (``LogTail``: the size, Merkle frontier and latest entry time the writer keeps in memory, so an
append reads nothing and no entry's time goes back).

A write function queues its hands, entries and hashes in ``Rows``, written at its end with a few
multi-row INSERTs; one that refuses (batches.REFUSED) raises before it has written anything.
Nothing here begins, commits or rolls back: the writer thread does, around a batch.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from fairdeck.log import merkle
from fairdeck.log.cosignature import add_cosignatures as cosigned
from fairdeck.log.logentry import MAGIC, TIME_AT
from fairdeck_server import refusals
from fairdeck_server.storage.base import (
    Change,
    Created,
    HandBatch,
    HandRecord,
    LogForkError,
    NewHand,
    StoredCheckpoint,
    TokenRecord,
    _Frontier,
    same_request,
)
from fairdeck_server.storage.rows import (
    HAND_COLUMNS,
    TOKEN_COLUMNS,
    HandRow,
    batch_hand_rows,
    encode_seeds,
    hand_record,
    hand_row,
    token_record,
    token_row,
)
from fairdeck_server.storage.sqlite.reader import (
    CHECKPOINT_AT,
    LATEST_CHECKPOINT,
    hash_reader,
    last_entry_stamp,
    select_hand,
    stored_log_size,
)

T = TypeVar("T")
_sha256 = hashlib.sha256

ROW_GROUPS = (256, 128, 64, 32, 16, 8, 4, 2, 1)
"""Rows per multi-row INSERT: n rows (n < 512) go in as one statement per set bit of n,
so the few SQL strings stay in sqlite3's statement cache. 256 x 16 hand columns is
4,096 bound values, well under SQLite's 32,766."""
_UPDATE = (
    "UPDATE hands SET client_seeds = ?, state = ?, dealt = ?, closed_ms = ?, server_seed = ?, "
    "reveal_index = ? WHERE hand_id = ?"
)


def _insert_sql(table: str, columns: str, width: int, rows: int) -> str:
    one = "(" + ", ".join("?" * width) + ")"
    return f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([one] * rows)  # noqa: S608 - constants


_INSERTS = {
    (table, rows): _insert_sql(table, columns, width, rows)
    for table, columns, width in (
        ("hands", HAND_COLUMNS, 16),
        ("log_entries", "idx, entry", 2),
        ("log_hashes", "idx, hash", 2),
    )
    for rows in ROW_GROUPS
}
"""The multi-row INSERTs, built once (constants only: every value is bound)."""


def _insert_rows(conn: sqlite3.Connection, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert ``rows`` with as few statements (and GIL hand-offs) as ROW_GROUPS allow."""
    done = 0
    for size in ROW_GROUPS:
        while len(rows) - done >= size:
            values = [v for row in rows[done : done + size] for v in row]
            conn.execute(_INSERTS[table, size], values)
            done += size


class Rows:
    """Rows an operation writes, inserted together at its end."""

    __slots__ = ("entries", "hands", "hashes")

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes]] = []
        self.hashes: list[tuple[int, bytes]] = []
        self.hands: list[HandRow] = []

    def write(self, conn: sqlite3.Connection) -> None:
        _insert_rows(conn, "log_entries", self.entries)
        _insert_rows(conn, "log_hashes", self.hashes)
        _insert_rows(conn, "hands", self.hands)


Mark = tuple[int, _Frontier, bytes]
"""What an append changes in a LogTail, to put back if its transaction rolls back."""


class LogTail:
    """The log as the writer keeps it in memory: its size, its frontier (the complete subtrees, so
    an append reads nothing) and the time of its latest entry (the next one's is never earlier)."""

    __slots__ = ("frontier", "last_stamp", "size")

    def __init__(self) -> None:
        self.size = 0
        self.frontier = _Frontier([])
        self.last_stamp = bytes(8)
        """The latest entry's time as its 8 bytes (big-endian: compared as bytes, as numbers)."""

    def load(self, conn: sqlite3.Connection) -> None:
        """Take the size, frontier and latest time from the database (at start)."""
        self.size = stored_log_size(conn)
        self.frontier = _Frontier.load(self.size, hash_reader(conn))
        self.last_stamp = last_entry_stamp(conn)

    def catch_up(self, conn: sqlite3.Connection) -> bool:
        """Take in what other processes appended (``serve --processes N``, docs/scaling.md); whether
        they had. Under BEGIN IMMEDIATE the writer holds the database's one write lock, so the size
        cannot move until COMMIT. When it moved since this writer's last batch, the frontier is read
        again from the stored hashes (O(log n) rows); otherwise this costs one lookup."""
        size = stored_log_size(conn)
        if size == self.size:
            return False
        self.size = size
        self.frontier = _Frontier.load(size, hash_reader(conn))
        self.last_stamp = max(self.last_stamp, last_entry_stamp(conn))
        return True

    def append(self, entry: bytes, rows: Rows) -> int:
        """Give ``entry`` the next index and queue it with its stored hashes.

        The left siblings an append needs are always on the frontier (the
        complete subtrees of the current tree), kept in memory, so an append
        reads nothing from the database.
        """
        index = self.size
        if entry.startswith(MAGIC) and len(entry) >= TIME_AT.stop:  # times never go backwards
            stamp = entry[TIME_AT]
            if stamp < self.last_stamp:
                entry = entry[: TIME_AT.start] + self.last_stamp + entry[TIME_AT.stop :]
            else:
                self.last_stamp = stamp
        hashes = self.frontier.append(index, _sha256(b"\x00" + entry).digest())  # RFC 9162 2.1.1: leaf
        start = 2 * index - index.bit_count()  # merkle.stored_hash_index(0, index)
        rows.entries.append((index, entry))
        rows.hashes.extend(zip(range(start, start + len(hashes)), hashes, strict=True))
        self.size = index + 1
        return index

    def mark(self) -> Mark:
        return self.size, self.frontier.copy(), self.last_stamp

    def restore(self, mark: Mark) -> None:
        self.size, self.frontier, self.last_stamp = mark


# -- hands ------------------------------------------------------------------------------------------


def create_many(conn: sqlite3.Connection, tail: LogTail, hands: Sequence[NewHand]) -> list[Created]:
    """Insert hands with their log entries: a few multi-row INSERTs per table, not one per row."""
    rows = Rows()
    out = create_rows(conn, tail, hands, rows)
    rows.write(conn)
    return out


def create_rows(
    conn: sqlite3.Connection | None, tail: LogTail, hands: Sequence[NewHand], rows: Rows
) -> list[Created]:
    """Give ``hands`` their log indexes and queue their rows in ``rows`` (written by the caller).
    ``conn`` None: a plain creation (no request id), which reads nothing."""
    out = []
    for new in hands:
        r = new.record
        existing = _existing(conn, r) if r.request_id is not None and conn is not None else None
        if existing is not None:
            out.append(Created(existing, found=True))
            continue
        index = tail.append(new.log_entry, rows)
        reveal_index = None if new.reveal_entry is None else tail.append(new.reveal_entry, rows)
        rows.hands.append(hand_row(r, index, reveal_index))
        out.append(Created(replace(r, commit_index=index, reveal_index=reveal_index)))
    return out


def _existing(conn: sqlite3.Connection, r: HandRecord) -> HandRecord | None:
    """The hand an earlier request with this request id created, if the request was the same."""
    row = conn.execute(
        f"SELECT {HAND_COLUMNS} FROM hands WHERE tenant = ? AND request_id = ?",  # noqa: S608
        (r.tenant, r.request_id),
    ).fetchone()
    if row is None:
        return None
    existing = hand_record(row)
    if not same_request(existing, r):
        raise refusals.request_id_reused()
    return existing


def batch_rows(tail: LogTail, batch: HandBatch, rows: Rows) -> int:
    """Give a batch of hands its log indexes and queue its rows; the index of its first entry."""
    base = tail.size
    for entry in batch.entries:
        tail.append(entry, rows)
    rows.hands.extend(batch_hand_rows(batch, base))
    return base


def update_hand(
    conn: sqlite3.Connection,
    tail: LogTail,
    tenant: str,
    hand_id: str,
    decide: Callable[[HandRecord], tuple[Change, T]],
) -> tuple[HandRecord, T]:
    current = select_hand(conn, tenant, hand_id)
    if current is None:
        raise refusals.hand_not_found()
    change, result = decide(current)
    new = change.record
    if change.log_entry is not None:
        rows = Rows()
        new = replace(new, reveal_index=tail.append(change.log_entry, rows))
        rows.write(conn)
    if new == current:
        return new, result
    conn.execute(_UPDATE, _update_row(new))
    return new, result


def update_hands(
    conn: sqlite3.Connection,
    tail: LogTail,
    tenant: str,
    ids: list[str],
    decide: Callable[[HandRecord], tuple[Change, Any]],
) -> list[HandRecord | refusals.DealerError]:
    marks = ",".join("?" * len(ids))  # placeholders only; the values are bound
    query = f"SELECT {HAND_COLUMNS} FROM hands WHERE hand_id IN ({marks})"  # noqa: S608
    found = {row[0]: row for row in conn.execute(query, ids) if row[1] == tenant}
    rows, updates = Rows(), []
    out: list[HandRecord | refusals.DealerError] = []
    for hand_id in ids:
        row = found.get(hand_id)
        try:
            if row is None:
                raise refusals.hand_not_found()
            current = hand_record(row)
            change, _ = decide(current)
        except refusals.DealerError as e:  # it wrote nothing: the others go on
            out.append(e)
            continue
        new = change.record
        if change.log_entry is not None:
            new = replace(new, reveal_index=tail.append(change.log_entry, rows))
        if new != current:
            updates.append(_update_row(new))
        out.append(new)
    rows.write(conn)
    conn.executemany(_UPDATE, updates)
    return out


def _update_row(new: HandRecord) -> tuple[Any, ...]:
    """The values of ``_UPDATE`` for a changed hand."""
    return (
        encode_seeds(new.client_seeds),
        int(new.state),
        new.dealt,
        new.closed_ms,
        new.server_seed,
        new.reveal_index,
        new.hand_id,
    )


# -- checkpoints, tokens, facts ---------------------------------------------------------------------


def put_checkpoint(
    conn: sqlite3.Connection, tail: LogTail, size: int, root: bytes, note: bytes, time_ms: int
) -> StoredCheckpoint:
    """Store a signed checkpoint if it moves the head forward (compare-and-swap); the head after.
    A size already signed is never replaced; another root there, or a root that is not the stored
    tree's, raises LogForkError."""
    same = conn.execute(CHECKPOINT_AT, (size,)).fetchone()
    if same is not None:
        if bytes(same[1]) != root:
            raise LogForkError(f"a different root is already signed for tree size {size}")
        return StoredCheckpoint(same[0], bytes(same[1]), bytes(same[2]))
    if size > tail.size or merkle.tree_hash(size, hash_reader(conn)) != root:
        raise LogForkError(f"checkpoint root for size {size} is not the stored tree's")
    head = conn.execute(LATEST_CHECKPOINT).fetchone()
    if head is not None and head[0] > size:
        return StoredCheckpoint(head[0], bytes(head[1]), bytes(head[2]))
    conn.execute(
        "INSERT INTO checkpoints (size, root, note, time_ms) VALUES (?, ?, ?, ?)",
        (size, root, note, time_ms),
    )
    return StoredCheckpoint(size, root, note)


def add_cosignatures(conn: sqlite3.Connection, size: int, lines: Sequence[str]) -> StoredCheckpoint | None:
    row = conn.execute("SELECT root, note FROM checkpoints WHERE size = ?", (size,)).fetchone()
    if row is None:
        return None
    note = cosigned(bytes(row[1]), lines)
    if note != bytes(row[1]):
        conn.execute("UPDATE checkpoints SET note = ? WHERE size = ?", (note, size))
    return StoredCheckpoint(size, bytes(row[0]), note)


def put_token(conn: sqlite3.Connection, token: TokenRecord) -> None:
    try:
        conn.execute(
            f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            token_row(token),
        )
    except sqlite3.IntegrityError:
        raise ValueError(f"token {token.token_id} already exists") from None


def revoke_token(conn: sqlite3.Connection, token_id: str, when_ms: int) -> TokenRecord | None:
    conn.execute(
        "UPDATE tokens SET revoked_ms = ? WHERE token_id = ? AND revoked_ms IS NULL",
        (when_ms, token_id),
    )
    row = conn.execute(
        f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?",  # noqa: S608
        (token_id,),
    ).fetchone()
    return None if row is None else token_record(row)


def set_meta(conn: sqlite3.Connection, name: str, expected: str | None, value: str) -> bool:
    """Set ``name`` to ``value`` if it is still ``expected`` (None: unset); False if it was not."""
    row = conn.execute("SELECT value FROM fairdeck_meta WHERE name = ?", (name,)).fetchone()
    if (None if row is None else str(row[0])) != expected:
        return False
    conn.execute(
        "INSERT INTO fairdeck_meta (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (name, value),
    )
    return True


# -- the health probe -------------------------------------------------------------------------------


def probe_file(path: Path) -> None:
    """One write committed on a connection of its own, as a batch is (the database's write lock, a
    WAL append, fsync): raises the sqlite3 error of a file or mount that is read-only, a lock held
    outside, a full disk. Health's probe, and the dealer's last check before it serves."""
    conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=rw", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        probe_write(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def probe_write(conn: sqlite3.Connection) -> None:
    """Rewrite the one row of ``health_probe`` (the storage's probe: health checks call it too)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS health_probe "
        "(id INTEGER PRIMARY KEY CHECK (id = 1), at_ms INTEGER NOT NULL)"
    )
    now_ms = time.time_ns() // 1_000_000
    conn.execute("INSERT OR REPLACE INTO health_probe (id, at_ms) VALUES (1, ?)", (now_ms,))
