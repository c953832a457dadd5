"""Run the real console script with its stderr on a pseudo-terminal, the way a person at a
terminal runs it, to see what a progress bar draws there (and that it draws nothing elsewhere)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass

from tests.support.env import clean_env
from tests.support.forked_cli import ForkedCli


@dataclass
class Run:
    returncode: int
    stdout: str
    terminal: str
    """Everything the command wrote to stderr, as the terminal received it."""


def fairdeck_on_pty(*args: str, timeout: float = 120, forked: ForkedCli | None = None) -> Run:
    """``python -m fairdeck.cli ARGS`` with stderr on a 100-column pty and stdout on a pipe; with
    ``forked``, in a process it forks (stdout on a file), which opens the pty by its name."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    if forked is not None:
        return _forked_on_pty(forked, master, slave, args, timeout)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fairdeck.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=clean_env(),
    )
    os.close(slave)
    stdout: list[bytes] = []
    # stdout on its own thread, so that a full pipe never stops the command while the pty is read.
    reader = threading.Thread(target=lambda: stdout.append(proc.stdout.read() if proc.stdout else b""))
    reader.start()
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"fairdeck {' '.join(args)} ran past {timeout} s")
            ready, _, _ = select.select([master], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last holder of the terminal's other end has gone
                break
            if not chunk:
                break
            seen += chunk
        returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        reader.join(timeout=10)
    return Run(returncode, b"".join(stdout).decode(), seen.decode(errors="replace"))


def _forked_on_pty(forked: ForkedCli, master: int, slave: int, args: tuple[str, ...], timeout: float) -> Run:
    """The terminal is read on a thread while the call runs (a full pty would stop the command),
    then drained; ``slave`` stays open until then, so a read never meets the hang-up."""
    seen = bytearray()
    done = threading.Event()

    def read_terminal() -> None:
        while True:
            ready, _, _ = select.select([master], [], [], 0 if done.is_set() else 0.1)
            if ready:
                seen.extend(os.read(master, 65536))
            elif done.is_set():
                return

    reader = threading.Thread(target=read_terminal)
    reader.start()
    try:
        run = forked(*args, timeout=timeout, stderr=os.ttyname(slave))
    finally:
        done.set()
        reader.join(timeout=10)
        os.close(slave)
        os.close(master)
    return Run(run.returncode, run.stdout, seen.decode(errors="replace"))


def fairdeck_on_pipes(*args: str, timeout: float = 120, forked: ForkedCli | None = None) -> Run:
    """The same command with stdout and stderr on pipes (a script, a CI job, a log file); with
    ``forked``, on files, in a process it forks."""
    if forked is not None:
        run = forked(*args, timeout=timeout)
        return Run(run.returncode, run.stdout, run.stderr)
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )
    return Run(done.returncode, done.stdout, done.stderr)
