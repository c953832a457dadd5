"""Giving the system back the memory that a burst of calls freed. No grpc.

glibc's malloc keeps what is freed in its arenas for reuse, and gives back only the top of each
heap: after a flood of 20,000 Watch streams, refused and ended, the dealer's RSS stayed 50 MiB
above what it was, though nothing held that memory. ``trim`` asks glibc to give every free page
back (``malloc_trim(0)``, which uses madvise on free pages inside the heap too); the dealer calls
it every TRIM_SECONDS, off the event loop. Where there is no glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

TRIM_SECONDS = 5.0
"""Seconds between two trims: a few milliseconds of a thread's time each, at most."""


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
