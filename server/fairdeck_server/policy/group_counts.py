"""Per-tenant counts shared by the processes of ``serve --processes N``, so caps hold per group.

The supervisor makes one anonymous shared file (``make``: memfd, never a path anyone can swap)
and every worker maps it (``GroupCounts``). A table of ``slots`` rows (8 MiB): a tenant's key (16 bytes of
SHA-256 of its name), when it was last used, then per kind (CALLS and STREAMS under way, HANDS
held by calls running, OPENED: hands ever reserved, for limits.OpenHandsCap) a 64-bit count per
worker. A worker writes only its own counts; ``take`` reads the others' and adds its own under
an exclusive fcntl lock on the file (microseconds), so two workers never both take a tenant's
last unit. A replacement worker zeroes its own counts (what a killed one held is free again). A
tenant is placed by hash, probing at most PROBE rows; a row is free for another tenant once
nothing is under way and it went unused for IDLE_S. With none free in its window, that tenant
is counted in its own process only (a warning, once). No grpc; counts are no secret.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os
import struct
import tempfile
import time

log = logging.getLogger(__name__)
_USED = struct.Struct("<d")

CALLS, STREAMS, HANDS, OPENED = 0, 1, 2, 3
KINDS = 4
UNDER_WAY = (CALLS, STREAMS, HANDS)
SLOTS = 16_384
"""Rows, at most: fewer when the workers are many, so that the table stays within TABLE_BYTES."""
TABLE_BYTES = 8 << 20
PROBE = 64
KEY = 16
HEAD = KEY + 8
"""A row's key and when it was last used (time.monotonic, the same clock in every process)."""
IDLE_S = 10.0
"""A row with nothing under way, unused this long, may go to another tenant: longer than any
OpenHandsCap keeps a count before it reads storage again (its OPENED snapshot is then new)."""


def slots(workers: int) -> int:
    """Rows of the table for ``workers`` processes."""
    return max(PROBE, min(SLOTS, TABLE_BYTES // (HEAD + 8 * KINDS * workers)))


def size(workers: int) -> int:
    """Bytes of the table for ``workers`` processes."""
    return slots(workers) * (HEAD + 8 * KINDS * workers)


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
        self._row = HEAD + 8 * KINDS * workers
        self._slots = slots(workers)
        self._map = mmap.mmap(fd, size(workers))
        self._counts = struct.Struct(f"<{KINDS * workers}q")
        self._warned = False
        self._local: dict[tuple[str, int], int] = {}
        """Counts of tenants that found no row (counted here only)."""

    def reset_own(self) -> None:
        """Zero this worker's counts in every row: a process that replaces one starts clean."""
        with self._locked():
            for slot in range(self._slots):
                for kind in range(KINDS):
                    self._write(slot, kind, 0)

    def take(
        self, tenant: str, kind: int, n: int, limit: int, base: int = 0, also: tuple[int, ...] = ()
    ) -> bool:
        """Add ``n`` to this worker's count of ``tenant`` (and to its counts of the kinds in
        ``also``) if ``base`` plus every worker's count plus ``n`` stays within ``limit`` (0: no
        limit); False, and nothing added, if not."""
        with self._locked():
            slot = self._slot(tenant, claim=True)
            if slot is None:
                held = self._local.get((tenant, kind), 0)
                if limit > 0 and base + held + n > limit:
                    return False
                for k in (kind, *also):
                    self._local[(tenant, k)] = self._local.get((tenant, k), 0) + n
                return True
            counts = self._read(slot)
            total = sum(counts[kind * self._workers : (kind + 1) * self._workers])
            if limit > 0 and base + total + n > limit:
                return False
            for k in (kind, *also):
                self._write(slot, k, counts[k * self._workers + self._index] + n)
            return True

    def give(self, tenant: str, n: int, *kinds: int) -> None:
        """Take ``n`` back from this worker's counts of ``tenant`` of ``kinds`` (never below 0)."""
        with self._locked():
            slot = self._slot(tenant, claim=False)
            for kind in kinds:
                if slot is None:
                    left = self._local.get((tenant, kind), 0) - n
                    if left > 0:
                        self._local[(tenant, kind)] = left
                    else:
                        self._local.pop((tenant, kind), None)
                    continue
                own = self._read(slot)[kind * self._workers + self._index]
                self._write(slot, kind, max(0, own - n))

    def totals(self, tenant: str, *kinds: int) -> tuple[int, ...]:
        """Every worker's counts of ``tenant``, one total per kind, read at one moment."""
        with self._locked():
            slot = self._slot(tenant, claim=False)
            if slot is None:
                return tuple(self._local.get((tenant, kind), 0) for kind in kinds)
            counts = self._read(slot)
            return tuple(sum(counts[k * self._workers : (k + 1) * self._workers]) for k in kinds)

    def close(self) -> None:
        self._map.close()

    # -- the table, under the lock ----------------------------------------------------------------

    def _slot(self, tenant: str, *, claim: bool) -> int | None:
        """The row of ``tenant``: found in its window, else (``claim``) the first free one there."""
        key = hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).digest()[:KEY]
        start = int.from_bytes(key[:8], "big") % self._slots
        now = time.monotonic()
        free = None
        for step in range(min(PROBE, self._slots)):
            slot = (start + step) % self._slots
            at = slot * self._row
            if self._map[at : at + KEY] == key:
                _USED.pack_into(self._map, at + KEY, now)
                return slot
            if free is None and claim and self._idle(slot, now):
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
        _USED.pack_into(self._map, at + KEY, now)
        for kind in range(KINDS):  # what the row's last tenant opened is not this one's
            for worker in range(self._workers):
                struct.pack_into("<q", self._map, self._at(free, kind, worker), 0)
        return free

    def _idle(self, slot: int, now: float) -> bool:
        at = slot * self._row
        if self._map[at : at + KEY] == bytes(KEY):
            return True
        counts = self._read(slot)
        w = self._workers
        if any(any(counts[k * w : (k + 1) * w]) for k in UNDER_WAY):
            return False
        used: float = _USED.unpack_from(self._map, at + KEY)[0]
        return now - used > IDLE_S

    def _at(self, slot: int, kind: int, worker: int) -> int:
        return slot * self._row + HEAD + 8 * (kind * self._workers + worker)

    def _read(self, slot: int) -> tuple[int, ...]:
        return self._counts.unpack_from(self._map, slot * self._row + HEAD)

    def _write(self, slot: int, kind: int, value: int) -> None:
        struct.pack_into("<q", self._map, self._at(slot, kind, self._index), value)

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
