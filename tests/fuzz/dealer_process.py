"""The fuzzed dealer, in a child process: ``RunningDealer`` (tests/dealers.py)
with the config given as JSON, until its standard input closes.

A process of its own, for two reasons. The fuzzer and the dealer each get a
core (in one process they share the GIL, and 140,000 calls would not fit the
time budget). And a crash is seen as a crash: a dealer that dies, or cannot
drain and exit cleanly after the run, fails the test instead of taking
pytest down with it. Its log (stderr) is kept, to check that nothing
unexpected was logged.

    python -m tests.fuzz.dealer_process DATA_DIR '{"rate_limit": 0}'
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

from fairdeck_server.vault import KEY_ENV

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    from tests.dealers import RunningDealer

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    dealer = RunningDealer(Path(argv[0]), **json.loads(argv[1]))
    print(dealer.start(), flush=True)
    sys.stdin.read()  # until the parent closes it
    dealer.close()
    print("stopped", flush=True)
    return 0


class DealerProcess:
    """The parent's handle: ``target``, ``data_dir``, ``alive()``, ``stop()``, ``log()``."""

    def __init__(self, data_dir: Path, log_path: Path, **config: object) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self._log: IO[str] = log_path.open("w")
        env = {k: v for k, v in os.environ.items() if k != KEY_ENV}  # the key file, as in production
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.dealer_process", str(data_dir), json.dumps(config)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.target = self.proc.stdout.readline().strip()
        assert self.target.startswith("127.0.0.1:"), f"the dealer did not start: {self.log()}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float | None:
        """CPU time the dealer used so far (Linux; None elsewhere): the budget's other half."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 30) -> tuple[int, str]:
        """Close its stdin so it drains and exits; return (exit code, what it printed)."""
        if self.proc.returncode is not None:
            return self.proc.returncode, ""
        try:
            out, _ = self.proc.communicate(input="", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self._log.close()
        return self.proc.returncode, out

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
