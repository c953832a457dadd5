"""What an SQLite failure means, in one line with its fix: the only module that reads the driver's
errors. ``explain`` names the file and the fix (only damage is fixed by a backup, and that advice
always carries ``RESTORE``'s fork warning); ``kind`` says it in a few words for a client (no path);
``error_name`` names it for a log line (never its message, which may quote a value);
``is_storage_fault`` tells the database failing from a bug of ours; ``unreadable`` is the audit
reader's refusal. Explaining a failure never raises: a dying disk answers stat with EIO.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path

from fairdeck.log.audit import LogUnreadable
from fairdeck_server.refusals import RESTORE

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
    unwritable = [p for p in files if _exists(p) and not _writable(p)]
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


def error_name(e: BaseException) -> str:
    """An exception named without its message (which may quote a value): the class and SQLite's
    error code name, for a log line."""
    code = getattr(e, "sqlite_errorname", None)
    return type(e).__name__ + (f" ({code})" if code else "")


def _exists(path: Path) -> bool:
    """Whether ``path`` is there; False when even that cannot be told (a dying disk answers stat
    with EIO): explaining a failure must never raise, or it ends the storage thread explaining it."""
    try:
        return path.exists()
    except OSError:
        return False


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


STORAGE_FAULTS = (sqlite3.OperationalError, sqlite3.InternalError)
"""Driver errors that mean the database failed (locked, read-only, full, I/O, a table
gone), not our code: with sqlite3.DatabaseError itself (a damaged file) they become
STORAGE_UNAVAILABLE. ProgrammingError, IntegrityError and the like stay bugs (INTERNAL)."""


def is_storage_fault(e: BaseException) -> bool:
    return isinstance(e, STORAGE_FAULTS) or type(e) is sqlite3.DatabaseError


def unreadable(path: Path, error: sqlite3.Error) -> LogUnreadable:
    """The audit reader's refusal of a database it cannot read (``reader.read_log``)."""
    # sqlite's own words ("file is not a database", "database disk image is malformed",
    # "no such table: log_entries") say which of corrupt or foreign it is.
    if not is_damage(error):  # a lock, a mode, a mount: the file is fine, say what it is
        return LogUnreadable(f"cannot read the dealer database: {explain(path, error)}")
    return LogUnreadable(
        f"cannot read the dealer database {path}: {error}; audit the live dealer with --target, or {RESTORE}"
    )
