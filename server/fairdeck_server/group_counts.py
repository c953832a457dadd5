"""Per-tenant counts shared by the processes of ``serve --processes N``, so caps hold per group.

The supervisor makes one anonymous shared file (``make``: memfd, never a path anyone can swap)
and every worker maps it (``GroupCounts``). It is a table of SLOTS rows: a tenant's key (16 bytes
of SHA-256 of its name), then per kind (CALLS in flight, STREAMS, HANDS reserved by calls still
running) one 32-bit count per worker. A worker writes only its own counts, and ``take`` reads
the others' and adds its own under an exclusive fcntl lock on the file (microseconds), so two
workers never both take a tenant's last unit. A worker that starts (a replacement) zeroes its
own counts: what a killed worker held is free again. A tenant is placed by hash, probing at most
PROBE rows; a row whose counts are all zero is free for another tenant. With none free in its
window (thousands of tenants busy at once), that tenant is counted in its own process only, and
a warning says so once. No grpc; counts are no secret.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os
import struct
import tempfile

log = logging.getLogger(__name__)

CALLS, STREAMS, HANDS = 0, 1, 2
KINDS = 3
SLOTS = 16_384
PROBE = 64
KEY = 16


def size(workers: int) -> int:
    """Bytes of the table for ``workers`` processes."""
    return SLOTS * (KEY + 4 * KINDS * workers)


def make(workers: int) -> int:
    """A new zeroed table for ``workers`` processes: its descriptor, inheritable."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("fairdeck-tenant-counts")
    else:  # no memfd: an unlinked temporary file, as private
        fd = os.dup(tempfile.TemporaryFile().fileno())  # noqa: SIM115 - the descriptor outlives it
    os.ftruncate(fd, size(workers))
    os.set_inheritable(fd, True)
    return fd


class GroupCounts:
    """Worker ``index`` of ``workers``'s view of the shared table on descriptor ``fd``."""

    def __init__(self, fd: int, index: int, workers: int) -> None:
        self._fd = fd
        self._index = index
        self._workers = workers
        self._row = KEY + 4 * KINDS * workers
        self._map = mmap.mmap(fd, size(workers))
        self._counts = struct.Struct(f"<{KINDS * workers}i")
        self._warned = False
        self._local: dict[tuple[str, int], int] = {}
        """Counts of tenants that found no row (counted here only)."""

    def reset_own(self) -> None:
        """Zero this worker's counts in every row: a process that replaces one starts clean."""
        with self._locked():
            for slot in range(SLOTS):
                base = slot * self._row + KEY
                for kind in range(KINDS):
                    at = base + 4 * (kind * self._workers + self._index)
                    self._map[at : at + 4] = b"\0\0\0\0"

    def take(self, tenant: str, kind: int, n: int, limit: int, base: int = 0) -> bool:
        """Add ``n`` to this worker's count of ``tenant`` if ``base`` plus every worker's count
        plus ``n`` stays within ``limit`` (0: no limit); False, and nothing added, if not."""
        with self._locked():
            slot = self._slot(tenant, claim=True)
            if slot is None:
                held = self._local.get((tenant, kind), 0)
                if limit > 0 and base + held + n > limit:
                    return False
                self._local[(tenant, kind)] = held + n
                return True
            counts = self._read(slot)
            total = sum(counts[kind * self._workers : (kind + 1) * self._workers])
            if limit > 0 and base + total + n > limit:
                return False
            self._write(slot, kind, counts[kind * self._workers + self._index] + n)
            return True

    def give(self, tenant: str, kind: int, n: int) -> None:
        """Take ``n`` back from this worker's count of ``tenant`` (never below 0)."""
        with self._locked():
            slot = self._slot(tenant, claim=False)
            if slot is None:
                left = self._local.get((tenant, kind), 0) - n
                if left > 0:
                    self._local[(tenant, kind)] = left
                else:
                    self._local.pop((tenant, kind), None)
                return
            own = self._read(slot)[kind * self._workers + self._index]
            self._write(slot, kind, max(0, own - n))

    def total(self, tenant: str, kind: int) -> int:
        """Every worker's count of ``tenant`` (a diagnostic)."""
        with self._locked():
            slot = self._slot(tenant, claim=False)
            if slot is None:
                return self._local.get((tenant, kind), 0)
            return sum(self._read(slot)[kind * self._workers : (kind + 1) * self._workers])

    def close(self) -> None:
        self._map.close()

    # -- the table, under the lock ----------------------------------------------------------------

    def _slot(self, tenant: str, *, claim: bool) -> int | None:
        """The row of ``tenant``: found in its window, else (``claim``) the first free one there."""
        key = hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).digest()[:KEY]
        start = int.from_bytes(key[:8], "big") % SLOTS
        free = None
        for step in range(PROBE):
            slot = (start + step) % SLOTS
            at = slot * self._row
            if self._map[at : at + KEY] == key:
                return slot
            if free is None and not any(self._read(slot)):
                free = slot
        if not claim:
            return None
        if free is None:
            if not self._warned:
                self._warned = True
                log.warning("the per-tenant counts the processes share are full: some caps count per process")
            return None
        at = free * self._row
        self._map[at : at + KEY] = key
        return free

    def _read(self, slot: int) -> tuple[int, ...]:
        return self._counts.unpack_from(self._map, slot * self._row + KEY)

    def _write(self, slot: int, kind: int, value: int) -> None:
        at = slot * self._row + KEY + 4 * (kind * self._workers + self._index)
        struct.pack_into("<i", self._map, at, value)

    def _locked(self) -> _Lock:
        return _Lock(self._fd)


class _Lock:
    """An exclusive fcntl lock on the whole table, for one step (no thread shares a worker's)."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def __enter__(self) -> None:
        fcntl.lockf(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.lockf(self._fd, fcntl.LOCK_UN)
