"""A ``fairdeck serve --processes N`` group as a child process (``Group``: its port and its workers'
pids), and the channel option that gives each client a connection of its own (``OWN``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.connections import OWN_CONNECTION
from tests.support.dealers import DealerProcess


class Group(DealerProcess):
    """`fairdeck serve --processes N` in a subprocess: its port, its workers' pids."""

    def __init__(self, data: Path, processes: int, stderr: Path, *args: str) -> None:
        super().__init__(
            data, stderr, "--processes", str(processes), "--rate-limit", "0", "--max-open-hands", "0", *args
        )
        rest = self.listening.group(4) or ""
        match = re.fullmatch(r"(\d+) processes, pids ([\d ]+)", rest)
        assert match, f"unexpected listening line {self.listening.group(0)!r}"
        assert self.listening.group(3) == str(data) and int(match.group(1)) == processes
        self.pids = [int(p) for p in match.group(2).split()]
        assert len(self.pids) == processes

    def stop(self) -> tuple[int, str, str]:
        code = self.terminate(timeout=60)
        return code, "\n".join(self.rest_of_stdout()) + "\n", self.stderr()


OWN = list(OWN_CONNECTION)
"""A connection of its own per channel: the kernel spreads connections over the workers."""
