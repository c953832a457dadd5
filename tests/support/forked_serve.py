"""``fairdeck serve`` and ``fairdeck codealer serve`` started without an interpreter's start:
``ServeForker`` keeps one child (this module run with -m) that imported them once and forks a
process per start, which runs the console script's ``__main__`` (runpy, as ``-m`` does) with the
stdout pipe and stderr file it is handed (SCM_RIGHTS) and exits as the interpreter does. ``start``
returns a ``ForkedProcess``, which answers as ``subprocess.Popen`` does (pid, stdout, poll, wait,
send_signal, kill, returncode): what ``DealerProcess`` and ``CodealerProcess`` run given a forker.

Why: a dealer's start costs 0.45-0.7 s of CPU, most of it the interpreter and the dealer's imports;
test_crash starts 21. Invariants: the forking process is single-threaded and runs only its loop;
each start's process comes from it, so starts share no state; its environment is ``clean_env()``,
its cwd and umask the caller's; stdin is /dev/null. Exit statuses are read through a pidfd, signals
sent through one, so a reused pid is never signalled. Only for a plain start (no ``env`` or ``wrap``
of DealerProcess, no ``env`` of CodealerProcess). ``run`` is ``subprocess.run`` of a forked start,
its stdout read with a deadline. A failure closes every descriptor it had opened.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, NoReturn

PRELOAD = ("fairdeck.cli.dispatch", "fairdeck_server.cli.serve_commands", "fairdeck_server.run.app")
"""What the forking process imports once: the console script's entry and the dealer."""
WITH_CODEALER = (
    *PRELOAD,
    "fairdeck_server.cli.codealer_command",
    "fairdeck_server.codealer.holder",
    "fairdeck_server.edge.codealer_servicer",
)
"""The same and the co-dealer's serve: what the ``serve_forker`` fixture (fixtures.py) imports."""
READY_S = 120.0
"""How long the forking process may take to import them, or to answer a start: never a timing bar."""
STDOUT_AFTER_EXIT_S = 10.0
"""How long ``run`` waits for the end of a start's stdout once the start ended: its own writes are
all in the pipe by then, so a pipe still open is held by a process it left behind."""


class ForkedProcess:
    """One forked ``fairdeck serve``, as far as a test uses a ``subprocess.Popen``."""

    def __init__(self, pid: int, stdout: IO[str], forker: ServeForker) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._forker = forker
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # it has already ended and been reaped
            self._pidfd = -1

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._forker.status(self.pid)
            if self.returncode is not None and self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["fairdeck", "serve"], timeout or 0.0)
            self._forker.ended(self.pid, left)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None and self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):  # ended, its status not read yet
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ServeForker:
    def __init__(self, preload: Sequence[str] = PRELOAD) -> None:
        from tests.support.env import clean_env

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"serve-forker-{os.getpid()}-{id(self)}.log"
        self._log = self._log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, *preload],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                env=clean_env(),
                cwd=Path(__file__).parents[2],  # where ``tests`` is a package; each start changes to its own
            )
        except BaseException:
            self._close_files()
            raise
        finally:
            theirs.close()
        self._lock = threading.Lock()  # one start at a time: its pid is the next answer
        self._changed = threading.Condition()
        self._pids: list[int] = []
        self._ended: dict[int, int] = {}
        self._gone: str | None = None
        self._sock.settimeout(READY_S)
        try:
            ready = self._sock.recv(4096)
        except TimeoutError:
            ready = b""
        if ready != b'{"ready": true}':  # an import failed, or hung: its reason is in the log
            self._fail(f"the forking process did not start ({ready!r}): {self._forker_log()}")
        if said := self._forker_log():  # a warning at import: a fresh `fairdeck` would print it
            self._fail(f"the forking process printed at import (each fresh `fairdeck` would too): {said}")
        self._sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _fail(self, why: str) -> NoReturn:
        """Stop the forking process, close its socket, remove its log, and fail with ``why``."""
        self._proc.kill()
        self._proc.wait()
        self._close_files()
        raise AssertionError(why)

    def _close_files(self) -> None:
        self._sock.close()
        self._log.close()
        self._log_path.unlink(missing_ok=True)

    def _forker_log(self) -> str:
        self._log.flush()
        return self._log_path.read_text(errors="replace")

    def _read(self) -> None:
        while message := self._sock.recv(4096):
            got = json.loads(message)
            with self._changed:
                if "pid" in got:
                    self._pids.append(got["pid"])
                else:
                    self._ended[got["exit"]] = got["status"]
                self._changed.notify_all()
        with self._changed:
            self._gone = f"the forking process exited ({self._proc.wait()}): {self._forker_log()}"
            self._changed.notify_all()

    def start(self, argv: Sequence[str], stderr: IO[str], cwd: Path | None = None) -> ForkedProcess:
        """``fairdeck ARGV`` forked: its stdout a pipe read as text, its stderr ``stderr``."""
        from tests.support.env import clean_env

        request = {"argv": list(argv), "cwd": str(cwd or os.getcwd()), "env": clean_env(), "umask": umask()}
        read, write = os.pipe()
        try:
            with self._lock:
                try:
                    socket.send_fds(self._sock, [json.dumps(request).encode()], [write, stderr.fileno()])
                finally:
                    os.close(write)
                with self._changed:
                    assert self._changed.wait_for(lambda: self._pids or self._gone, READY_S), "no pid"
                    assert self._gone is None, self._gone
                    pid = self._pids.pop(0)
        except BaseException:  # the start never was: nothing will read its pipe
            os.close(read)
            raise
        return ForkedProcess(pid, os.fdopen(read, "r", encoding="utf-8", errors="strict"), self)

    def run(
        self, argv: Sequence[str], timeout: float, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``fairdeck ARGV`` forked (in ``cwd``) and waited for, as ``subprocess.run(capture_output=True,
        text=True, timeout=...)`` would: past ``timeout`` s it is killed and TimeoutExpired raised.
        Its stdout must end within STDOUT_AFTER_EXIT_S of its exit, else AssertionError: a read
        without a deadline hung for ever on a pipe a process it left behind held open."""
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err:
            proc = self.start(argv, err, cwd)
            try:
                out = _read_to_end(proc, time.monotonic() + timeout)
            except subprocess.TimeoutExpired as e:
                proc.kill()
                proc.wait()
                raise subprocess.TimeoutExpired(["fairdeck", *argv], timeout, e.output) from None
            except AssertionError as e:
                raise AssertionError(f"fairdeck {' '.join(argv)} exited ({proc.wait()}) {e}") from None
            finally:
                proc.stdout.close()
            err.seek(0)
            return subprocess.CompletedProcess(["fairdeck", *argv], proc.wait(), out, err.read())

    def status(self, pid: int) -> int | None:
        """The exit status of ``pid`` (negative: the signal that ended it), once it has ended."""
        with self._changed:
            return self._ended.get(pid)

    def ended(self, pid: int, timeout: float | None) -> None:
        """Wait until ``pid`` has ended or ``timeout`` s have passed."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._ended or self._gone, timeout)
            assert pid in self._ended or self._gone is None, self._gone

    def close(self) -> None:
        self._sock.shutdown(socket.SHUT_WR)  # its loop ends at end of input
        try:
            self._proc.wait(timeout=READY_S)
        finally:
            self._reader.join(timeout=10)
            self._sock.close()
            self._log.close()
            self._log_path.unlink(missing_ok=True)


def _read_to_end(proc: ForkedProcess, deadline: float) -> str:
    """``proc``'s stdout to its end, as text: TimeoutExpired if ``proc`` runs past ``deadline``,
    AssertionError if the pipe is still open STDOUT_AFTER_EXIT_S after it ended."""
    fd, chunks = proc.stdout.fileno(), bytearray()
    ended = None if proc._pidfd >= 0 else time.monotonic()  # -1: it had ended when it was made

    def text() -> str:  # as a text-mode pipe reads it (universal newlines)
        return io.TextIOWrapper(io.BytesIO(bytes(chunks)), encoding="utf-8", errors="strict").read()

    while True:
        left = (deadline if ended is None else ended + STDOUT_AFTER_EXIT_S) - time.monotonic()
        if left <= 0 and ended is None:
            raise subprocess.TimeoutExpired(["fairdeck"], 0, text())
        if left <= 0:
            raise AssertionError(
                f"but its stdout was still open {STDOUT_AFTER_EXIT_S:g} s later: a process it left "
                f"behind holds it (read so far: {text()[-200:]!r})"
            )
        ready, _, _ = select.select([fd] if ended is not None else [fd, proc._pidfd], [], [], left)
        if ended is None and proc._pidfd in ready:  # a pidfd is readable once its process ended
            ended = time.monotonic()
        if fd in ready:
            if not (chunk := os.read(fd, 1 << 16)):
                return text()
            chunks += chunk


def umask() -> int:
    """This process's umask, read without setting it (os.umask would, for every thread)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line in /proc/self/status")


def _serve(preload: Sequence[str]) -> None:
    """The forking process: import, then per request fork a process that runs the console script,
    and say each one's pid and, once it ended, its status. A start's process leaves through the
    interpreter's exit (its SystemExit or exception unwinds out of this loop)."""
    import gc
    import importlib
    import runpy

    # As the gc module's documentation advises before forking without exec (forked_cli.py).
    gc.disable()
    for name in preload:
        importlib.import_module(name)
    gc.freeze()
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a stray print of this loop goes to its log, never to a start's pipe

    def answer(**message: object) -> None:
        sock.send(json.dumps(message).encode())

    answer(ready=True)
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        ready, _, _ = select.select([sock.fileno(), *children], [], [])
        for fd in ready:
            if fd in children:
                pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                answer(exit=pid, status=os.waitstatus_to_exitcode(status))
                continue
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
            if not message:
                return
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                gc.enable()  # as in any interpreter
                sock.close()
                for other in children:
                    os.close(other)
                os.dup2(fds[0], 1)
                os.dup2(fds[1], 2)
                for received in fds:
                    os.close(received)
                os.chdir(request["cwd"])
                os.umask(request["umask"])  # a child inherits its parent's: the test's, not ours
                os.environ.clear()
                os.environ.update(request["env"])
                sys.argv = ["fairdeck", *request["argv"]]  # run_module puts the module's path first
                runpy.run_module("fairdeck.cli", run_name="__main__", alter_sys=True)
                raise SystemExit(0)  # __main__ ends in sys.exit; a module that returned exits 0
            for received in fds:
                os.close(received)
            children[os.pidfd_open(pid)] = pid
            answer(pid=pid)


if __name__ == "__main__":
    _serve(sys.argv[1:])
