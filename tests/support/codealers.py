"""``fairdeck codealer serve`` as a child process, for tests: init its dir once, start, stop; and
the dealer's side of it (the flags that pin it, a stub that carries the dealer's token, its
health as ``status`` reads it)."""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.v1 import codealer_pb2_grpc
from tests.support.env import clean_env
from tests.support.forked_serve import ForkedProcess, ServeForker

TEST_POOL = 2
"""Co-dealt decks a test dealer keeps ahead (the product's default is 16): a test opens a few hands,
and every pooled deck is two shuffles with proofs, about 0.1 s of the dealer's and co-dealer's CPU."""
LISTENING = re.compile(r"^fairdeck codealer listening on ([^ ]+):(\d+) \(identity ([0-9a-f]{64})\)$")


def init_codealer(directory: Path) -> str:
    """Make a co-dealer in ``directory`` as ``fairdeck codealer init --dir`` does, by its own
    function in this process (a child interpreter's start-up cost more than the keys); its identity
    key (hex). ``init_codealer_cli`` runs the real console script."""
    from fairdeck_server.cli.codealer_command import cmd_init

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cmd_init(argparse.Namespace(dir=str(directory)))
    assert rc == 0, err.getvalue()
    return out.getvalue().strip()


def init_codealer_cli(directory: Path) -> subprocess.CompletedProcess[str]:
    """``fairdeck codealer init --dir DIR``, the console script in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "codealer", "init", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )


class CodealerProcess:
    """A running co-dealer on 127.0.0.1:0 (or ``listen``); ``target`` is host:port. ``args`` go
    after ``serve``'s own; ``env`` replaces the clean environment's variables it names. ``forker``:
    forked from it (forked_serve.py) rather than a new interpreter, where no ``env`` is given. Its
    stderr (the log ``stop`` returns) goes to an unnamed file."""

    def __init__(
        self,
        directory: Path,
        listen: str = "127.0.0.1:0",
        *args: str,
        env: dict[str, str] | None = None,
        forker: ServeForker | None = None,
    ) -> None:
        self.directory = directory
        # Closed by ``stop``, which reads it: the process's whole life, not a block's.
        self._log: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        argv = ["codealer", "serve", "--dir", str(directory), "--listen", listen, *args]
        self.proc: subprocess.Popen[str] | ForkedProcess
        try:
            if forker is not None and env is None:
                self.proc = forker.start(argv, self._log)
            else:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "fairdeck.cli", *argv],
                    stdout=subprocess.PIPE,
                    stderr=self._log,
                    text=True,
                    env={**clean_env(), **(env or {})},
                )
        except BaseException:  # no process: its log is closed here, never by ``stop``
            self._log.close()
            raise
        assert self.proc.stdout is not None
        try:
            first = self.proc.stdout.readline()  # blocks until the line or the process's end
        except BaseException:  # not UTF-8, or interrupted: the process stopped and its files closed
            self.stop()
            raise
        match = LISTENING.match(first.strip())
        if match is None:
            self.stop()
            raise AssertionError(f"the co-dealer did not start: {first!r}")
        self.port = int(match.group(2))
        self.target = f"127.0.0.1:{self.port}"
        self.identity = match.group(3)

    @property
    def token_file(self) -> Path:
        return self.directory / "dealer.token"

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    def dealer_flags(self, pool: int = TEST_POOL) -> tuple[str, ...]:
        """The dealer's flags that pin this co-dealer and give it the dealer's token, with a
        pool of ``pool`` decks a tenant and spec (``--codeal-pool``)."""
        return (
            "--codealer",
            self.target,
            "--codealer-key",
            self.identity,
            "--codealer-token",
            f"@{self.token_file}",
            "--codeal-pool",
            str(pool),
        )

    def stub(self, token: str | None = "") -> codealer_pb2_grpc.CoDealerServiceStub:
        """A stub whose calls carry ``token`` (by default the dealer's; None: no credentials)."""
        return codealer_stub(self.target, self.token if token == "" else token)

    def log_so_far(self) -> str:
        """Its log (stderr) as written so far, the process running: read at offsets (``pread``),
        since the process writes at the file position it shares with ``self._log``."""
        if self._log.closed:
            return ""
        chunks, offset = [], 0
        while chunk := os.pread(self._log.fileno(), 1 << 16, offset):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def stop(self) -> str:
        """Stop it; its log (stderr)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = ""
        if not self._log.closed:
            self._log.seek(0)
            log = self._log.read()
            self._log.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return log

    def __enter__(self) -> CodealerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Details(
    collections.namedtuple("_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready")),
    grpc.ClientCallDetails,
):
    pass


class _Bearer(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    def __init__(self, token: str) -> None:
        self.header = ("authorization", f"Bearer {token}")

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        metadata = [*(details.metadata or ()), self.header]
        new = _Details(details.method, details.timeout, metadata, details.credentials, details.wait_for_ready)
        return continuation(new, request)


def codealer_stub(target: str, token: str | None) -> codealer_pb2_grpc.CoDealerServiceStub:
    """A CoDealerService stub on ``target`` whose calls carry ``token`` (None: none at all)."""
    channel = grpc.insecure_channel(target)
    if token is not None:
        channel = grpc.intercept_channel(channel, _Bearer(token))
    return codealer_pb2_grpc.CoDealerServiceStub(channel)


CODEAL = "fairdeck.v1.DealerService/codeal"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def status(target: str, service: str) -> int:
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=20
            )
        except grpc.RpcError as e:
            return -1 if e.code() == grpc.StatusCode.NOT_FOUND else -2
    return int(reply.status)


def online_copy(source: Path, target: Path) -> None:
    """A consistent copy of a live SQLite file (its WAL included), as an operator's backup takes it
    (``sqlite3 FILE ".backup COPY"``): a co-dealer's ledger, or a dealer's codeal.db."""
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)
