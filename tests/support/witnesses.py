"""A real ``fairdeck witness serve`` process on 127.0.0.1:0, and an HTTP client for it."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
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


def init_witness(directory: Path, name: str, *log_vkeys: str) -> str:
    """Make a witness that witnesses the given logs; returns its vkey."""
    done = witness_cli("init", "--dir", str(directory), "--name", name)
    assert done.returncode == 0, done.stderr
    with (directory / "logs.conf").open("a") as f:
        f.writelines(f"log {vkey}\n" for vkey in log_vkeys)
    return done.stdout.strip()


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


def init_log(data: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "init", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()
