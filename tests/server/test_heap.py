"""What ended calls freed goes back to the system (heap.py): glibc kept it, and after 20,000
Watch streams had ended the dealer stayed 50 MiB above where it began."""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

import pytest

from fairdeck_server import heap


def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc's")
def test_trim_gives_back_what_was_freed_in_the_middle_of_the_heap() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(4096) for _ in range(8192)]  # 32 MiB below the top of the heap
    last = libc.malloc(64)  # holds the top: free() alone gives none of it back
    heap.trim()
    for block in blocks:
        libc.free(block)
    assert heap.trim(), "malloc_trim gave nothing back"
    libc.free(last)
