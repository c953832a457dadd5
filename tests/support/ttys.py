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


@dataclass
class Run:
    returncode: int
    stdout: str
    terminal: str
    """Everything the command wrote to stderr, as the terminal received it."""


def fairdeck_on_pty(*args: str, timeout: float = 120) -> Run:
    """``python -m fairdeck.cli ARGS`` with stderr on a 100-column pty and stdout on a pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
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


def fairdeck_on_pipes(*args: str, timeout: float = 120) -> Run:
    """The same command with stdout and stderr on pipes (a script, a CI job, a log file)."""
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )
    return Run(done.returncode, done.stdout, done.stderr)
