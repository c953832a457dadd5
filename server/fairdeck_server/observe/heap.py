"""Giving the system back the memory that a burst of calls freed, and the serving process's
garbage collector (``tune_collector``). No grpc.

glibc's malloc keeps what is freed in its arenas for reuse, and gives back only the top of each
heap: after a flood of 20,000 Watch streams, refused and ended, the dealer's RSS stayed 50 MiB
above what it was, though nothing held that memory. ``trim`` asks glibc to give every free page
back (``malloc_trim(0)``, madvise on free pages inside the heap too). It walks every free chunk,
some 50 ms for a fragmented 100 MiB heap, so ``Trimmer`` trims only while the RSS is TRIM_ABOVE
over its floor (the RSS after the last trim that gave something back); the dealer asks it every
TRIM_SECONDS, off the event loop. Where there is no glibc (musl, macOS) nothing is trimmed.
"""

from __future__ import annotations

import ctypes
import gc
import os
from collections.abc import Callable

TRIM_SECONDS = 5.0
"""Seconds between two looks at the RSS."""
TRIM_ABOVE = 8 * 2**20
"""Bytes of RSS over the floor that make a trim worth its cost."""
KEPT = 4 * 2**20
"""A trim that gave back less than this found the RSS in use: it becomes the floor."""


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    trim: Callable[[int], int] = fn
    return trim


_TRIM = _malloc_trim()


def trim() -> bool:
    """Give free heap pages back to the system; whether any were (False without glibc)."""
    return _TRIM is not None and bool(_TRIM(0))


def rss() -> int:
    """This process's resident set, in bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Trimmer:
    """``tick`` trims when the RSS is TRIM_ABOVE over the floor; whether it trimmed."""

    def __init__(self, resident: Callable[[], int] = rss, give_back: Callable[[], bool] = trim) -> None:
        self._resident = resident
        self._give_back = give_back
        self.floor = resident()

    def tick(self) -> bool:
        now = self._resident()
        if not now or now - self.floor < TRIM_ABOVE:
            self.floor = min(self.floor, now) if now else self.floor
            return False
        self._give_back()
        after = self._resident()
        if now - after < KEPT:  # what it holds is in use: no trim until it grows again
            self.floor = after
        return True


FULL_COLLECTION_AFTER = 100
"""Younger collections between two full ones, at least (Python's default: 10); docs/scaling.md,
"The garbage collector"."""


def tune_collector() -> None:
    """The serving process's garbage collector: a full collection (every tracked object, with
    the event loop stopped) only after FULL_COLLECTION_AFTER collections of the middle
    generation. The calls in flight during a flood outlive the younger collections, and on a
    small heap Python's own rule then starts a full one every few seconds, 40-60 ms each, for
    objects that reference counting frees anyway (docs/scaling.md, "The garbage collector")."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_AFTER)
