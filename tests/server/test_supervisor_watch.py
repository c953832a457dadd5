"""The supervisor's watch (processes._watch) over stand-in workers: real processes that beat on
the heartbeat pipe as a worker does, or fall silent while still running (a worker whose event loop
or writer is stuck: the case a SIGSTOP cannot show, since the kernel then shows it stopped)."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time

import pytest

from fairdeck_server.processes import _Running, _watch

STAND_IN = """
import os, sys, time
fd = int(os.environ["FAIRDECK_WORKER_HEARTBEAT_FD"])
while True:
    if sys.argv[1] == "beat":
        os.write(fd, b".")
    time.sleep(0.1)
"""


def stand_in(index: int, mode: str) -> _Running:
    running = _Running.spawn(index, 2, [sys.executable, "-c", STAND_IN, mode], dict(os.environ), ())
    assert running.proc.stdout is not None
    os.set_blocking(running.proc.stdout.fileno(), False)  # as the supervisor reads its workers'
    return running


def test_a_worker_running_but_silent_is_replaced_after_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    workers = [stand_in(0, "beat"), stand_in(1, "silent")]
    for w in workers:
        w.last_beat = time.monotonic()
    silent, beating = workers[1].proc, workers[0].proc
    stopping = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        stopping.set()
        for w in workers:
            w.proc.send_signal(signal.SIGTERM)

    watch = threading.Thread(
        target=_watch, args=(workers, lambda i: stand_in(i, "beat"), stopping.is_set, stop, 5, 1.0)
    )
    began = time.monotonic()
    watch.start()
    try:
        while workers[1].proc is silent and time.monotonic() < began + 10:
            time.sleep(0.05)
        took = time.monotonic() - began
    finally:
        stop(signal.SIGTERM, None)
        watch.join(timeout=30)
        for w in workers:
            w.close()
    assert workers[1].proc is not silent, "the silent worker was never replaced"
    assert 1.0 <= took < 3, took
    assert silent.returncode == -signal.SIGKILL and workers[0].proc is beating
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and re.fullmatch(
        rf"fairdeck serve: process 2 of 2 \(pid {silent.pid}\) stopped answering for 1\.\d s; "
        rf"killed it and started pid {workers[1].proc.pid} in its place",
        said[0],
    ), said
