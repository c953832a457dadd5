"""What a SQLite error on the dealer's database means, and what to do: one line each.

A damaged file, a file or directory the dealer may not write, a read-only mount, a lock held by
another process and a full disk each get their own words and fix (``explain``). Only damage is
fixed by restoring a backup, and that advice always carries the warning in ``RESTORE``: an older
copy of a log whose checkpoints were published is a fork (docs/operations.md, "Restoring a
backup"). Nothing here quotes a row or a value, only SQLite's error name and the file system.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path

from fairdeck_server.refusals import RESTORE

__all__ = ["RESTORE", "explain", "is_damage", "kind"]

DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def explain(path: Path, error: BaseException) -> str:
    """One line: what ``error`` (raised using the database at ``path``) means, and the fix."""
    name = str(getattr(error, "sqlite_errorname", "") or "")
    words = str(error)
    directory = path.parent
    if name.startswith(DAMAGE) or "malformed" in words or "not a database" in words:
        return f"database {path} is damaged ({words}); do not write to it; {RESTORE}"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in words:
        return (
            f"database {path} is locked by another process ({words}): a backup or an sqlite3 shell "
            f"holding a write transaction? find it with `fuser {path}`, end it, and start again; "
            "the file is not damaged"
        )
    if name.startswith("SQLITE_FULL") or _full(directory) or _errno(error) == errno.ENOSPC:
        return (
            f"the disk holding {directory} is full ({_free(directory)} free) ({words}): free some space "
            "and start again; nothing acknowledged is lost, and the file is not damaged"
        )
    if _read_only_mount(directory):
        return (
            f"{directory} is on a read-only file system ({words}): remount it read-write (check the "
            "disk first: a file system turns read-only after I/O errors); the file is not damaged"
        )
    files = (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
    unwritable = [p for p in files if p.exists() and not _writable(p)]
    if unwritable or not _writable(directory):
        what = unwritable[0] if unwritable else directory
        return (
            f"{what} is not writable by this user (uid {os.getuid()}; {_mode(what)}) ({words}): the dealer "
            f"needs to write the database and its -wal and -shm files in {directory}; fix the owner or "
            "mode (chown, chmod u+w); the file is not damaged"
        )
    if name.startswith("SQLITE_IOERR") or name.startswith("SQLITE_CANTOPEN"):
        return (
            f"database {path}: the system refused an I/O ({name or words}): check the disk and the "
            "kernel log (dmesg); do not restore a backup over a file that may be fine"
        )
    return f"database {path}: {name or type(error).__name__} ({words})"


def kind(path: Path, error: BaseException) -> str:
    """A few words for a client (no path): what kind of storage failure this is."""
    line = explain(path, error)
    for needle, words in (
        ("is damaged", "the database is damaged"),
        ("is locked", "the database is locked"),
        ("is full", "the disk is full"),
        ("read-only file system", "the file system is read-only"),
        ("not writable", "the database is not writable"),
    ):
        if needle in line:
            return words
    return "an I/O error"


def _errno(error: BaseException) -> int | None:
    return getattr(error, "errno", None)


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def _read_only_mount(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _full(directory: Path) -> bool:
    """Less than a page free: SQLite cannot grow the WAL by one frame."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 8192


def _free(directory: Path) -> str:
    try:
        st = os.statvfs(directory)
    except OSError:
        return "unknown space"
    return f"{st.f_bavail * st.f_frsize:,} bytes"


def _mode(path: Path) -> str:
    try:
        st = path.stat()
    except OSError as e:
        return e.strerror or str(e)
    return f"mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}"


def is_damage(error: BaseException) -> bool:
    """Whether a sqlite3 error says the file itself is damaged (not a lock, a mode or the disk)."""
    name = str(getattr(error, "sqlite_errorname", "") or "")
    return isinstance(error, sqlite3.DatabaseError) and (
        name.startswith(DAMAGE) or "malformed" in str(error) or "not a database" in str(error)
    )
