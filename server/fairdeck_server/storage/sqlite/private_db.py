"""SQLite files that hold sealed secrets, or which seat was dealt what, are private: mode 0600.

SQLite gives a database's -wal and -shm files the database file's own mode, so the file is made
0600 before SQLite first opens it (``make_private``), and an older file left more open (by a
fairdeck that let the umask decide) is taken to 0600 with its -wal and -shm, in one log line
(``tighten``). Used by the co-dealer's ledger and the dealer's co-dealt hands file.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)


def make_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it is not there, then ``tighten`` it."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    tighten(path)


def tighten(path: Path) -> None:
    """Take ``path`` and its -wal and -shm to 0600 (owner bits kept) where others could read them."""
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            os.chmod(file, mode & 0o700)
            log.warning("%s was mode %04o: now %04o (only its owner may read it)", file, mode, mode & 0o700)
