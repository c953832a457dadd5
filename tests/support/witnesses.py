"""A real ``fairdeck witness serve`` process on 127.0.0.1:0, and an HTTP client for it; a log's
data dir and a witness's dir as ``fairdeck init`` and ``fairdeck witness init`` make them.

The real commands run once a test process per witness name (and once for a log); later calls
copy what they made (keys, empty state, config) into the test's own folder, so no two tests share
a file that either changes. A test of ``init`` itself runs ``witness_cli("init", ...)``."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

CLI = (sys.executable, "-m", "fairdeck.cli")
LISTENING = re.compile(r"^fairdeck witness listening on 127\.0\.0\.1:(\d+) \((\S+); (\d+) logs?\)$")


def witness_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "witness", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


_MADE = tempfile.TemporaryDirectory(prefix="fairdeck-inits-")
"""What the real init commands made in this process, removed at its exit."""
_made: dict[tuple[str, str], tuple[Path, str]] = {}


def _made_by(kind: str, name: str, init: Callable[[Path], str]) -> tuple[Path, str]:
    """The folder ``init`` made for ``(kind, name)`` in this process (run once) and its output."""
    if (kind, name) not in _made:
        folder = Path(_MADE.name) / f"{kind}-{len(_made)}"
        _made[kind, name] = folder, init(folder)
    return _made[kind, name]


def _copy_of(template: Path, to: Path) -> None:
    """``template`` at ``to`` (a new folder, as init makes it), modes kept: the keys stay 0600."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, to)


def _witness_init(directory: Path, name: str) -> str:
    done = witness_cli("init", "--dir", str(directory), "--name", name)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def init_witness(directory: Path, name: str, *log_vkeys: str) -> str:
    """Make a witness that witnesses the given logs; returns its vkey. The witness is
    ``fairdeck witness init``'s (run once a process per ``name``, then copied: same key, new
    empty state)."""
    template, vkey = _made_by("witness", name, lambda d: _witness_init(d, name))
    _copy_of(template, directory)
    with (directory / "logs.conf").open("a") as f:
        f.writelines(f"log {vkey}\n" for vkey in log_vkeys)
    return vkey


class WitnessProcess:
    def __init__(self, directory: Path, port: int = 0, env: dict[str, str] | None = None) -> None:
        """``env``: variables added to its environment (libfaketime's, to run it on another clock)."""
        self.directory = directory
        self.stderr_path = directory.parent / f"{directory.name}.stderr"
        self._stderr = self.stderr_path.open("a")
        self.proc = subprocess.Popen(
            [*CLI, "witness", "serve", "--dir", str(directory), "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().rstrip("\n")
        match = LISTENING.match(first)
        assert match, f"unexpected first line {first!r}; stderr: {self.stderr_path.read_text()}"
        self.port = int(match.group(1))
        self.vkey = match.group(2)
        self.url = f"http://127.0.0.1:{self.port}"

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read(), dict(response.getheaders())
        finally:
            conn.close()

    def add_checkpoint(self, body: bytes) -> tuple[int, bytes]:
        status, data, _ = self.request("POST", "/add-checkpoint", body)
        return status, data

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._stderr.close()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self._stderr.close()
        return self.proc.returncode


def _log_init(data: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "init", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def init_log(data: Path) -> str:
    """A new log's data dir as ``fairdeck init --data`` makes it; its verifier key. The command
    runs once a process; each call copies what it made (same keys, an empty log of its own)."""
    template, vkey = _made_by("log", "", _log_init)
    _copy_of(template, data)
    return vkey
