"""The writers' lock of ``serve --processes N``: an exclusive flock on one file, waited for at most
``timeout`` seconds.

A blocked flock takes no timeout and cannot be interrupted, and polling with LOCK_NB adds latency
to every contended batch. So the writer tries LOCK_NB, and when the lock is busy hands the
blocking wait to a helper thread and waits for it at most ``timeout``: the helper's flock wakes
the moment the lock is free, and lets it go at once if nobody wants it any more. flock locks
belong to the open file, so a lock the helper took is the writer's; the writer never tries
LOCK_NB while the helper waits (the lock would be granted to both).

The lock is the file, not its name: with ``shared_fd`` (the supervisor's, inherited) each writer
opens its own open file of that inode through /proc/self/fd, whatever the path names by then.
``holder`` names the process holding the lock (from /proc/locks) for the log line; ``held_for``
says how long this process has held it (its heartbeat stops when that is too long: processes.py).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

PROC_LOCKS = Path("/proc/locks")


class WriterLock:
    """An exclusive flock on ``path`` with a bounded wait. ``acquire`` and ``release`` are
    called by one thread (the storage writer's)."""

    def __init__(self, path: Path, timeout: float, *, shared_fd: int | None = None) -> None:
        """``shared_fd``: an inherited descriptor of the lock file (``path`` is then its name for
        messages only): the lock is taken on that file whatever its path now names."""
        self.path = path
        self.timeout = timeout
        self.shared_fd = shared_fd
        self._fd = -1
        self._cond = threading.Condition()
        self._helper: threading.Thread | None = None
        self._wanted = False
        """The writer waits for the helper's lock."""
        self._granted = False
        """The helper took the lock for the writer, which has not picked it up yet."""
        self._pending = False
        """The helper is in a blocking flock."""
        self._closing = False
        self._held_since: float | None = None
        self.waited_at: float | None = None
        """When an ``acquire`` last found the lock held by another process, or, once it got the
        lock after that wait, when it got it: the other process held it until then (monotonic)."""

    def open(self) -> None:
        """Open (create) the lock file; raises OSError. An open file of its own even on a shared
        file: flock belongs to the open file, and the inherited one is the whole group's."""
        if self.shared_fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        else:  # the inode behind the descriptor, even unlinked: never a path lookup
            self._fd = os.open(f"/proc/self/fd/{self.shared_fd}", os.O_RDWR | os.O_CLOEXEC)

    def acquire(self, timeout: float | None = None) -> bool:
        """Take the lock: True, or False if it was not free within ``timeout`` (default: the
        lock's own)."""
        with self._cond:
            if not self._pending:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._held_since = time.monotonic()
                    return True
                except BlockingIOError:
                    pass
            self.waited_at = time.monotonic()
            self._wanted = True
            if self._helper is None:
                self._helper = threading.Thread(target=self._wait, name="fairdeck-writer-lock", daemon=True)
                self._helper.start()
            self._cond.notify_all()
            got = self._cond.wait_for(lambda: self._granted, self.timeout if timeout is None else timeout)
            self._wanted = False
            if not got:
                return False
            self._granted = False
            self._cond.notify_all()
            self._held_since = self.waited_at = time.monotonic()  # the other held it until now
            return True

    def release(self) -> None:
        self._held_since = None
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def held_for(self) -> float:
        """Seconds this process has held the lock (0 when it does not hold it)."""
        since = self._held_since
        return 0.0 if since is None else time.monotonic() - since

    def holder(self) -> int | None:
        """The pid of the process that holds the lock, as /proc/locks tells (None: not known)."""
        try:
            inode = os.fstat(self._fd).st_ino
            lines = PROC_LOCKS.read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            fields = line.split()
            # "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF"; waiters are marked "->"
            if (
                len(fields) >= 6
                and fields[1:4] == ["FLOCK", "ADVISORY", "WRITE"]
                and fields[5].rsplit(":", 1)[-1] == str(inode)
                and fields[4].isdigit()
            ):
                return int(fields[4])
        return None

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            if self._fd >= 0 and not self._pending:  # else the helper closes it once its flock returns
                os.close(self._fd)
                self._fd = -1

    def _wait(self) -> None:
        """The helper: a blocking flock whenever the writer wants the lock."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._wanted or self._closing)
                if self._closing:
                    if self._fd >= 0:  # close() left it to this thread
                        os.close(self._fd)
                        self._fd = -1
                    return
                self._pending = True
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # wakes as soon as the holder lets go
            with self._cond:
                self._pending = False
                if self._closing:
                    os.close(self._fd)  # the lock goes with it
                    self._fd = -1
                    return
                if self._wanted:
                    self._granted = True
                    self._cond.notify_all()
                    # The writer holds it now; nothing more to do until it wants it again.
                    self._cond.wait_for(lambda: not self._granted or self._closing)
                else:  # the writer gave up waiting: let the others have it
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
