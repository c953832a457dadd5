"""What an attacker on the host takes from a running process, and a search of it for many secrets.

``memory_dump`` reads every readable mapping of a process through ``/proc/PID/mem`` while the
process is stopped (SIGSTOP), which is what ``gcore`` does through ptrace: the kernel lets the
parent (or root) read it. ``SecretIndex`` finds any of thousands of secrets, in every encoding of
``tests.security.test_no_leak.forms``, in a haystack of hundreds of MB in one pass: every needle is
at least ``2 * BLOCK - 1`` bytes, so it holds a whole ``BLOCK``-aligned block of the haystack, at
one of ``BLOCK`` offsets from its start; the haystack's aligned blocks are looked up in a set of
those (in C, no Python loop per byte), and a block that matches is checked against its needles.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.secret_forms import forms
from tests.support.waits import wait_for

BLOCK = 16
UNREADABLE = ("[vvar]", "[vvar_vclock]", "[vsyscall]")
"""Mappings the kernel never lets /proc/PID/mem read (they hold no process data)."""
_MAPS = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$")


@dataclass(frozen=True)
class Region:
    """A run of adjacent readable mappings of the process, as read."""

    start: int
    name: str
    data: bytes


def memory_dump(pid: int, while_stopped: Callable[[], object] = lambda: None) -> list[Region]:
    """Every readable mapping of ``pid``, read while it is stopped (``while_stopped`` runs in the
    same stop); adjacent mappings are joined (a secret may straddle two). Raises PermissionError if
    the kernel refuses the read."""
    os.kill(pid, signal.SIGSTOP)
    try:
        _wait_stopped(pid)
        while_stopped()
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
        regions: list[Region] = []
        try:
            mem = open(f"/proc/{pid}/mem", "rb", buffering=0)  # noqa: SIM115 (closed below)
        except PermissionError as e:
            raise AssertionError(
                f"cannot read /proc/{pid}/mem ({e.strerror}): the kernel refuses this process a "
                "ptrace read of its own child (kernel.yama.ptrace_scope 2 without CAP_SYS_PTRACE, "
                "or 3, or an LSM rule); the dump test needs it: run as root or with ptrace_scope <= 1"
            ) from None
        with mem:
            for line in maps:
                m = _MAPS.match(line)
                assert m is not None, line
                start, end, perms, name = int(m[1], 16), int(m[2], 16), m[3], m[4]
                if "r" not in perms or name in UNREADABLE:
                    continue
                mem.seek(start)
                data = mem.read(end - start)
                if regions and regions[-1].start + len(regions[-1].data) == start:
                    last = regions.pop()
                    regions.append(Region(last.start, last.name or name, last.data + data))
                else:
                    regions.append(Region(start, name, data))
        return regions
    finally:
        os.kill(pid, signal.SIGCONT)


def _wait_stopped(pid: int) -> None:
    def stopped() -> bool:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"

    wait_for(f"process {pid} to stop on SIGSTOP", stopped, timeout=30, every=0.01)


PAGE = 4096
_ZEROS = bytes(PAGE)


def _nonzero_runs(data: bytes, margin: int) -> list[tuple[int, int]]:
    """(start, end) of each run of pages of ``data`` that are not all zeros, widened by ``margin``."""
    runs: list[tuple[int, int]] = []
    for at in range(0, len(data), PAGE):
        page = data[at : at + PAGE]
        if page == _ZEROS[: len(page)]:
            continue
        start, end = max(at - margin, 0), min(at + PAGE + margin, len(data))
        if runs and runs[-1][1] >= start:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
    return runs


class SecretIndex:
    """Secrets by name, in every form ``forms`` makes; ``search`` says which appear where."""

    def __init__(self, secrets: dict[str, bytes]) -> None:
        self.blocks: dict[bytes, list[tuple[str, bytes]]] = {}
        self.longest = 0
        for what, value in secrets.items():
            for form in forms(value):
                needle = form.encode() if isinstance(form, str) else form
                if len(needle) < 2 * BLOCK - 1:
                    raise ValueError(f"{what}: {form!r} is too short for the block search")
                for j in range(BLOCK):  # where the first aligned block inside it can start
                    self.blocks.setdefault(needle[j : j + BLOCK], []).append((what, needle))
                self.longest = max(self.longest, len(needle))
        self.keys = frozenset(self.blocks)

    def search(self, haystack: bytes) -> set[str]:
        """Which secrets (``name as form``) appear in ``haystack``. Pages of zeros (most of a
        process's untouched memory) are skipped: each run of other pages is searched with
        ``longest`` bytes of its neighbours, which are zeros, so no needle across an edge is lost."""
        found = set()
        for start, end in _nonzero_runs(haystack, self.longest):
            found |= self._search(haystack[start:end])
        return found

    def _search(self, haystack: bytes) -> set[str]:
        n = len(haystack)
        blocks = map(haystack.__getitem__, map(slice, range(0, n, BLOCK), range(BLOCK, n + BLOCK, BLOCK)))
        found = set()
        for block in self.keys.intersection(blocks):
            for what, needle in self.blocks[block]:
                if needle in haystack:
                    found.add(f"{what} as {needle!r}")
        return found

    def search_text(self, text: str) -> set[str]:
        """As ``search``, over text read as UTF-8 and as Latin-1 (raw bytes decoded either way)."""
        return self.search(text.encode("utf-8", "surrogateescape")) | self.search(
            text.encode("latin-1", "replace")
        )
