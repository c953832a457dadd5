"""A real dealer for tests, two ways: in this process (``RunningDealer``: DealerServer on
127.0.0.1:0 in its own event-loop thread, any ServerConfig, restartable) or as the real console
script in a child process (``DealerProcess``: ``fairdeck serve``, to be signalled, killed,
paused or run under a faked clock; ``forker``: forked from a process that imported it once)."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from fairdeck_server.run.app import DealerServer
from fairdeck_server.run.config import ServerConfig
from tests.support.env import clean_env
from tests.support.forked_serve import ForkedProcess, ServeForker

LISTENING = re.compile(r"^fairdeck dealer listening on ([^ ]+):(\d+) \(data: ([^;)]+)(?:; (.*))?\)$")
"""The line ``fairdeck serve`` prints once it serves: host, port, data dir and, for a worker or a
``--processes`` group, what follows the data dir."""


class RunningDealer:
    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.data_dir = data_dir
        self.config = {"grace_seconds": 5, **config}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: DealerServer | None = None
        self.target = ""

    def __enter__(self) -> RunningDealer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def start(self) -> str:
        # No heap trims: this process's heap is the test runner's, and malloc_trim walks all of it
        # holding malloc's lock, stalling the dealer's loop (in a full run: past a 1 s deadline).
        config = ServerConfig(listen="127.0.0.1:0", data_dir=self.data_dir, **self.config)
        self.server = DealerServer(config, trim_heap=False)
        port = self._run(self.server.start())
        self.target = f"127.0.0.1:{port}"
        return self.target

    def stop(self) -> None:
        if self.server is not None:
            self._run(self.server.stop())
            self.server = None

    def restart(self) -> str:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def deal_closed_hand(target: str, deck: str, draws: int = 5) -> str:
    """A hand dealt as the README says (two players' seeds by commit-then-reveal), drawn from and
    closed; its id."""
    from fairdeck.client import DealerClient, PlayerSeed, SeedRound

    with DealerClient(target) as client:
        hand = client.open_hand(deck)
        table = SeedRound(hand.hand_id, hand.commitment, seats=2)
        players = [PlayerSeed.create(hand.hand_id, seat, hand.commitment) for seat in range(2)]
        for p in players:
            table.commit(p.seat, p.commitment)
        for p in players:
            table.reveal(p.seat, p.reveal(table.commitments))
        client.shuffle(hand.hand_id, table.seeds)
        client.draw(hand.hand_id, draws)
        client.close_hand(hand.hand_id)
        return hand.hand_id


class DealerProcess:
    """``python -m fairdeck.cli serve --listen 127.0.0.1:0 --data DIR ARGS``: the real console
    script as a child process, started and waited for until it prints its listening line. Its
    stdout is read line by line in a thread; its stderr (the log) goes to ``stderr_path``.

    ``env`` replaces the clean environment's variables it names (``LD_PRELOAD`` for faketime, say).
    ``wrap`` is a command the dealer runs under (``nsenter ...`` to enter a mount namespace,
    ``setpriv ...`` to drop a capability): it must exec the command after it, keeping its pid.
    """

    def __init__(
        self,
        data_dir: Path | None,
        stderr_path: Path,
        *args: str,
        env: dict[str, str] | None = None,
        listen: str | None = "127.0.0.1:0",
        cwd: Path | None = None,
        start_timeout: float = 60,
        wrap: Sequence[str] = (),
        forker: ServeForker | None = None,
    ) -> None:
        """``data_dir`` and ``listen`` None: no ``--data`` or ``--listen`` flag (the environment or a
        config file gives them). ``forker``: forked from it (forked_serve.py) rather than a new
        interpreter, where neither ``env`` nor ``wrap`` is given."""
        self.data_dir = data_dir
        self.stderr_path = stderr_path
        self._stderr: IO[str] = stderr_path.open("a")
        flags = [*(("--listen", listen) if listen else ()), *(("--data", str(data_dir)) if data_dir else ())]
        self.proc: subprocess.Popen[str] | ForkedProcess
        if forker is not None and env is None and not wrap:
            self.proc = forker.start(["serve", *flags, *args], self._stderr, cwd)
        else:
            self.proc = subprocess.Popen(
                [*wrap, sys.executable, "-m", "fairdeck.cli", "serve", *flags, *args],
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
                env=clean_env(**(env or {})),
                cwd=cwd,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        try:
            first = self.lines.get(timeout=start_timeout)
        except queue.Empty:
            self.kill9()
            raise AssertionError(
                f"the dealer did not start in {start_timeout} s; stderr: {self.stderr()}"
            ) from None
        match = LISTENING.match(first or "")
        if match is None:
            self.terminate()
            raise AssertionError(f"the dealer did not start: {first!r}; stderr: {self.stderr()}")
        self.listening = match
        """The listening line's match: host, port, data dir, and the rest (``--processes``)."""
        self.port = int(match.group(2))
        self.target = f"127.0.0.1:{self.port}"
        self.pid = self.proc.pid

    def __enter__(self) -> DealerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float) -> str:
        """The next line of stdout; fails the test if the dealer exited instead."""
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"the dealer exited (rc {self.proc.poll()}); stderr: {self.stderr()}"
        return line

    def rest_of_stdout(self) -> list[str]:
        """What it printed after the listening line, once it has exited."""
        self._reader.join(timeout=10)
        out = []
        while (line := self.lines.get_nowait()) is not None:
            out.append(line)
        return out

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float | None:
        """CPU time the dealer used so far (Linux; None elsewhere)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def signal(self, signum: int) -> None:
        """Send ``signum`` (SIGSTOP and SIGCONT pause and resume it)."""
        self.proc.send_signal(signum)

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, as an operator stops it: it drains and exits; killed if it takes longer."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused dealer cannot drain
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        return self.proc.returncode

    def kill9(self) -> None:
        """SIGKILL: no drain, nothing flushed that was not on disk."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._stderr.close()
