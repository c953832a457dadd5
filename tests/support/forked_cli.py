"""``python -m fairdeck.cli ARGS`` in a fresh process each call, without an interpreter's start:
``ForkedCli`` keeps one child (this module run with -m) that imports the CLI once and forks a
process per call, which runs the console script's ``__main__`` (runpy, as ``-m`` does) and exits as
the interpreter does. A call returns a ``CompletedProcess`` as ``subprocess.run`` would; past its
timeout the call's process is killed and ``TimeoutExpired`` raised, so a hang fails the test.

Why: a process that imports the lab's CLI costs 1.5-2 s of CPU (grpc, scipy.stats) before its
first line; a module of such cases stretched each past a minute on a loaded machine. Invariants:
the forking process is single-threaded and runs only its loop; each call's process starts from it,
so calls share no state; its environment is ``clean_env()`` (no FAIRDECK_* variable); stdin is
/dev/null.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

PRELOAD = ("fairdeck.cli.commands", "fairdeck.cli.lab_command", "fairdeck.cli.lab_run")
"""What the forking process imports once: the console script's modules and the lab's."""
READY_S = 120.0
"""How long the forking process may take to import them: generous, never a timing bar."""


class ForkedCli:
    def __init__(self, preload: Sequence[str] = PRELOAD) -> None:
        from tests.support.env import clean_env

        self._dir = Path(tempfile.mkdtemp(prefix="forked-cli-"))
        self._log: IO[bytes] = (self._dir / "forker.log").open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=clean_env(),
            cwd=Path(__file__).parents[2],  # where ``tests`` is a package; each call changes to its own
        )
        self._calls, self._read = 0, b""
        self.cpu = 0.0
        """CPU seconds the calls' processes took, all together."""
        assert self._message(READY_S) == {"ready": True}

    def __call__(
        self, *args: str, timeout: float = 60, stderr: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``fairdeck ARGS`` in a process of its own, in this process's working directory; its
        stderr is ``stderr`` (a terminal's name, say) where given, else read back."""
        self._calls += 1
        out, err = self._dir / f"{self._calls}.out", self._dir / f"{self._calls}.err"
        request = {"argv": list(args), "stdout": str(out), "stderr": stderr or str(err), "cwd": os.getcwd()}
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        pid = self._message(READY_S)["pid"]
        try:
            done = self._message(timeout)
            status, self.cpu = done["status"], self.cpu + done["cpu"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._message(READY_S)
            raise subprocess.TimeoutExpired(["fairdeck", *args], timeout, out.read_bytes(), err.read_bytes())
        return subprocess.CompletedProcess(["fairdeck", *args], status, _text(out), _text(err))

    def _message(self, timeout: float) -> dict[str, Any]:
        """The forking process's next answer line, read from its pipe as it comes (no buffer of
        a file object, which would hide a second line from ``select``)."""
        assert self._proc.stdout is not None
        fd, deadline = self._proc.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self._read:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError
            chunk = os.read(fd, 4096)
            if not chunk:
                self._log.flush()
                log = (self._dir / "forker.log").read_text(errors="replace")
                raise AssertionError(f"the forking process exited ({self._proc.wait()}): {log}")
            self._read += chunk
        line, self._read = self._read.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()  # its loop ends at end of input
        try:
            self._proc.wait(timeout=READY_S)
        finally:
            self._log.close()
            for path in self._dir.iterdir():
                path.unlink()
            self._dir.rmdir()


def _text(path: Path) -> str:
    """As ``subprocess.run(text=True)`` decodes a pipe."""
    return path.read_bytes().decode(errors="strict") if path.exists() else ""


def _serve(preload: Sequence[str]) -> None:
    """The forking process: import, then per request fork a process that runs the console script.
    A call's process leaves through the interpreter's exit (its SystemExit or exception unwinds
    out of this loop): atexit, thread joins and flushes as for ``python -m``."""
    import gc
    import importlib
    import runpy

    # As the gc module's documentation advises before forking without exec: no collection here
    # leaves holes in the imported objects' pages, and frozen they are not walked by a call's
    # collections, so a call copies only the pages it writes (0.1-0.2 s of CPU against 0.5 s).
    gc.disable()
    for name in preload:
        importlib.import_module(name)
    gc.freeze()
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # what a stray print of this loop writes goes to its log, never to an answer

    def answer(**message: object) -> None:
        answers.write(json.dumps(message).encode() + b"\n")

    answer(ready=True)
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            gc.enable()  # as in any interpreter
            requests.close()
            answers.close()
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            os.dup2(os.open(request["stdout"], flags, 0o600), 1)
            os.dup2(os.open(request["stderr"], flags, 0o600), 2)
            os.chdir(request["cwd"])
            sys.argv = ["fairdeck", *request["argv"]]  # run_module puts the module's path first
            runpy.run_module("fairdeck.cli", run_name="__main__", alter_sys=True)
            raise SystemExit(0)  # __main__ ends in sys.exit; a module that returned exits 0
        answer(pid=pid)
        _, status, usage = os.wait4(pid, 0)
        answer(status=os.waitstatus_to_exitcode(status), cpu=usage.ru_utime + usage.ru_stime)


if __name__ == "__main__":
    _serve(sys.argv[1:])
