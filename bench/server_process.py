"""Server subprocesses for the benchmarks, and the load generator run against them.

``Server`` starts a command that prints ``... listening on HOST:PORT ...`` first (the
dealer, bench/trivial_server.py, ``serve --processes N`` with its worker pids) and stops it
with SIGTERM; ``loadgen`` runs bench/loadgen.py against one, in its own process, and returns
its JSON result. Shared by deal_bench.py, deal_ab.py, abuse_bench.py, replica_bench.py,
tiles_bench.py and witness_bench.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


class Server:
    """A server subprocess that prints ``... listening on HOST:PORT ...`` first."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = log
        self._err = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            raise RuntimeError(f"{name} did not start: {line!r}; see {log}")
        self.target = line.split("listening on ", 1)[1].split()[0]
        self.pid = self.proc.pid
        # `serve --processes N` names its workers: "... N processes, pids A B)"
        workers = line.rsplit("pids ", 1)[1].rstrip(")\n").split() if "processes, pids " in line else []
        self.pids = [self.pid, *map(int, workers)]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return self.proc.returncode


def serve_argv(data: Path, *flags: str) -> list[str]:
    """``fairdeck serve`` on a free loopback port over ``data``, warnings only, and every limit off
    (the benchmarks measure the dealer, not its limits); ``flags`` added at the end."""
    return [
        PYTHON, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", "--data", str(data),
        "--log-level", "WARNING", "--rate-limit", "0", "--max-open-hands", "0", "--default-deadline", "0",
        *flags,
    ]  # fmt: skip


def loadgen(args: list[str], server: Server) -> dict[str, Any]:
    argv = [
        PYTHON,
        str(HERE / "loadgen.py"),
        *args,
        "--target",
        server.target,
        "--server-pid",
        str(server.pid),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed against {server.name}: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    result["server"] = server.name
    return result
