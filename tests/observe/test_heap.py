"""What ended calls freed goes back to the system (heap.py): glibc kept it, and after 20,000
Watch streams had ended the dealer stayed 50 MiB above where it began."""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

import pytest

from fairdeck_server.observe import heap

# Not serial: the trim is this process's own heap, which no neighbour shares, and the trimmer's
# rule is checked against a stand-in RSS; neither holds time or CPU to a bar.


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


def test_the_trimmer_trims_only_while_the_rss_is_well_over_its_floor() -> None:
    """malloc_trim walks every free chunk (50 ms for a fragmented 100 MiB heap): run every 5 s
    whatever the RSS, it cost 2 ms of CPU per reflection answer during a flood."""
    mib = 2**20
    resident = [100 * mib]
    trims: list[int] = []

    def give_back() -> bool:
        trims.append(resident[0])
        resident[0] = max(100 * mib, resident[0] - 40 * mib)  # what it can give back
        return True

    trimmer = heap.Trimmer(lambda: resident[0], give_back)
    assert not trimmer.tick()  # at the floor: nothing to gain
    resident[0] = 105 * mib
    assert not trimmer.tick()  # a little over it: not worth 50 ms
    resident[0] = 200 * mib
    assert trimmer.tick() and resident[0] == 160 * mib  # a flood ended: given back
    assert trimmer.tick() and resident[0] == 120 * mib
    assert trimmer.tick() and resident[0] == 100 * mib  # 20 over it: trimmed
    assert not trimmer.tick() and len(trims) == 3
    resident[0] = 130 * mib  # a working set that grew, in use: one trim finds it so
    give_back_nothing = heap.Trimmer(lambda: resident[0], lambda: True)
    give_back_nothing.floor = 100 * mib
    assert give_back_nothing.tick() and give_back_nothing.floor == 130 * mib
    assert not give_back_nothing.tick()
