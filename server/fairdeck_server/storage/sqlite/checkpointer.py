"""WAL checkpoints off the writer's queue. The writer's connection has ``wal_autocheckpoint`` off,
so no COMMIT carries a checkpoint (about 3 ms, on one COMMIT in a hundred under bulk dealing, which
the next tenant's batch waited for). A thread with a connection of its own copies the WAL into the
database instead (``PRAGMA wal_checkpoint(PASSIVE)``): once PASS_PAGES are in the WAL and not yet
in the database, read from the wal-index's header in the -shm file, or PASS_EVERY after any were.

Invariant: the WAL stays bounded. SQLite restarts it only when a write begins with every frame
copied, which a PASSIVE pass beside a writer that keeps appending never leaves it (1.2 GB in 20 s
in bench/wal_checkpoint_probe.py). So after each pass the writer copies the few frames written
since on its own connection (``catch_up``), between batches: when it has nothing queued, or
CATCH_UP_WAIT after the pass, and at the latest FORCE_S after its last one, even if this thread is
stuck. A reader holding an old snapshot (a backup) keeps the WAL from restarting, as before. A
failed checkpoint (disk full, I/O) loses nothing, the frames stay in the durable WAL; it is logged
once until one succeeds. docs/scaling.md, "WAL checkpoints".
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import threading
import time
from pathlib import Path
from urllib.parse import quote

from fairdeck_server.storage.sqlite.schema import error_name

log = logging.getLogger(__name__)

INTERVAL = 0.05
"""Seconds between the background thread's looks at what the writer committed. A pass every 0.2 s
under bulk writes left the writer four times the frames to copy: 5.4 ms instead of 1.6 ms
(bench/wal_checkpoint_probe.py)."""
PASS_PAGES = 1000
"""WAL frames not yet copied that call for a pass: SQLite's own automatic checkpoint's 1,000 pages."""
PASS_EVERY = 1.0
"""Seconds after which fewer frames get a pass too, so a trickle of writes is not left in the WAL;
at most two fsyncs a second for it."""
MX_FRAME, N_BACKFILL = 16, 96
"""Offsets in the -shm file of the wal-index header's mxFrame (the WAL's last valid frame) and of
the checkpoint info's nBackfill (frames already copied), 32-bit native-endian integers
(https://sqlite.org/walformat.html, sections 2.1 and 2.2)."""
CATCH_UP_WAIT = 0.05
"""Seconds the writer, busy, leaves a pass's catch-up for a moment with nothing queued: the frames
written meanwhile are what it copies."""
AGAIN = 4
"""Passes in a row, at most, while a pass leaves over a quarter of PASS_PAGES not copied (written
while it ran), before the writer is asked to catch up."""
FORCE_S = 2.0
"""Seconds after which the writer catches up whatever the background thread did: the bound on the
WAL while this thread is stuck or failing."""


class Checkpointer:
    """The background thread, and when the writer's thread should catch up (``due``)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fairdeck-sqlite-checkpoints", daemon=True)
        self.written = 0
        """Batches the writer committed (bumped by the writer thread only)."""
        self._passed = 0  # ``written`` at the start of the last pass
        self._passed_at = time.monotonic()
        self._caught_up = 0  # ``written`` at the writer's last catch-up
        self._pass_at: float | None = None  # when a pass left frames for the writer to finish
        self._last_catch_up = time.monotonic()
        self._failing: list[bool] = [False, False]  # [background, writer]: said once for both
        self._shm: int | None = None  # SQLite's descriptor of the -shm file (``_left``)
        self.passes = 0
        self.catch_ups = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(INTERVAL * 20)

    def due(self, idle: bool) -> bool:
        """Whether the writer, between batches, should catch up now (``idle``: nothing queued)."""
        if self.written == self._caught_up:
            return False
        now = time.monotonic()
        passed = self._pass_at
        if passed is not None and (idle or now - passed >= CATCH_UP_WAIT):
            return True
        return now - self._last_catch_up >= FORCE_S

    def catch_up(self, conn: sqlite3.Connection) -> None:
        """Copy what the last pass left, on the writer's connection, between its transactions:
        with no write in between, the next one restarts the WAL (unless a reader holds it). Busy
        (another connection's checkpoint, another process's): again after the next batch."""
        written = self.written
        self._last_catch_up = time.monotonic()
        self.catch_ups += 1
        if self._checkpoint(conn, 1) or self._failing[1]:
            self._pass_at = None
            self._caught_up = written

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(
                f"file:{quote(str(self._path.absolute()))}?mode=rw", uri=True, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
            # A checkpoint syncs the database file before the WAL may restart over what it copied.
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as e:  # the writer still catches up every FORCE_S
            log.error(
                "WAL checkpoints: cannot open %s (%s); the writer checkpoints alone",
                self._path,
                error_name(e),
            )
            return
        try:
            while not self._stop.wait(INTERVAL):
                written, now = self.written, time.monotonic()
                if written == self._passed:
                    continue  # nothing new since the last pass
                if self._left() < PASS_PAGES and now - self._passed_at < PASS_EVERY:
                    continue
                self._passed, self._passed_at = written, now
                ran = 0
                while ran < AGAIN and self._checkpoint(conn, 0):  # each copies what the last left
                    ran += 1
                    if self._left() < PASS_PAGES // 4:
                        break
                if ran:
                    self.passes += ran
                    self._pass_at = time.monotonic()
        finally:
            conn.close()

    def _left(self) -> int:
        """WAL frames not yet copied into the database, as the -shm file says, read without its
        locks (a torn value only moves a pass) through SQLite's own descriptor of it: opening and
        closing the file here would drop every POSIX lock this process holds on it (SQLite's read,
        write and dead-man locks; https://sqlite.org/howtocorrupt.html, 2.2), and another process
        would rebuild the wal-index under the dealer. Unreadable: PASS_PAGES, a pass each INTERVAL."""
        try:
            shm = os.stat(f"{self._path}-shm")
            fd = self._shm
            if fd is None or not os.path.samestat(os.fstat(fd), shm):
                fd = self._shm = _descriptor_of(shm)
            if fd is None:
                return PASS_PAGES
            header = os.pread(fd, N_BACKFILL + 4, 0)
            (mx_frame,) = struct.unpack_from("=I", header, MX_FRAME)
            (backfilled,) = struct.unpack_from("=I", header, N_BACKFILL)
        except (OSError, struct.error):
            return PASS_PAGES
        return max(0, int(mx_frame) - int(backfilled))

    def _checkpoint(self, conn: sqlite3.Connection, who: int) -> bool:
        """One PASSIVE checkpoint: whether it ran (another connection's may hold the checkpoint
        lock: ``busy``, nothing to say)."""
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as e:
            if not any(self._failing):  # one line for both connections' failures
                log.error(
                    "WAL checkpoint failed (%s); the WAL keeps every write and grows until one succeeds",
                    error_name(e),
                )
            self._failing[who] = True
            return False
        if self._failing[who]:
            self._failing[who] = False
            if not any(self._failing):  # the other's fails still: not yet
                log.warning("WAL checkpoints succeed again")
        return not busy


def _descriptor_of(wanted: os.stat_result) -> int | None:
    """A descriptor this process has open on the file ``wanted`` (SQLite's), found without opening
    the file; None where there is none, or no /proc/self/fd to look in."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.path.samestat(os.stat(f"/proc/self/fd/{name}"), wanted):
                return int(name)
        except (OSError, ValueError):
            continue
    return None
