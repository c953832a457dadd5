"""``fairdeck codealer serve`` as a child process, for tests: init its dir once, start, stop."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.env import clean_env

LISTENING = re.compile(r"^fairdeck codealer listening on ([^ ]+):(\d+) \(identity ([0-9a-f]{64})\)$")


def init_codealer(directory: Path) -> str:
    """Make a co-dealer in ``directory``; its identity key (hex)."""
    out = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "codealer", "init", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=True,
    )
    return out.stdout.strip()


class CodealerProcess:
    """A running co-dealer on 127.0.0.1:0 (or ``listen``); ``target`` is host:port."""

    def __init__(self, directory: Path, listen: str = "127.0.0.1:0") -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fairdeck.cli",
                "codealer",
                "serve",
                "--dir",
                str(directory),
                "--listen",
                listen,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()  # blocks until the line or the process's end
        match = LISTENING.match(first.strip())
        if match is None:
            self.stop()
            raise AssertionError(f"the co-dealer did not start: {first!r}")
        self.port = int(match.group(2))
        self.target = f"127.0.0.1:{self.port}"
        self.identity = match.group(3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> CodealerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
