"""The data dir's lock file deleted or replaced under a live dealer: no second dealer starts on the
same data dir (it would say SERVING and fail every write), whether one process or a
``serve --processes`` group holds it, and ``fairdeck init`` is refused there too. The exclusion
is a lock on the directory itself, which no file operation undoes. The writers' lock of a group,
deleted, still keeps a replaced worker's writes in turn with the others'."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairdeck_server.storage import WRITER_LOCK_NAME
from tests.support.env import clean_env
from tests.support.faults import FaultRun, lines, wait_for, worker_pids


def second_refused(run: FaultRun) -> None:
    stderr = run.start_refused()
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    assert f"data dir {run.data_dir} is in use by another dealer" in stderr, stderr


@pytest.mark.parametrize("processes", [1, 2])
def test_deleting_the_lock_file_does_not_let_a_second_dealer_in(run: FaultRun, processes: int) -> None:
    dealer = run.start(*(("--processes", str(processes)) if processes > 1 else ()))
    run.ledger.deal(dealer.target, 2)
    (run.data_dir / "fairdeck.lock").unlink()
    second_refused(run)
    (run.data_dir / "fairdeck.lock").write_text("1\n")  # replaced by another file, not locked by anyone
    second_refused(run)
    init = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "init", "--data", str(run.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert init.returncode == 2 and "Traceback" not in init.stderr, init
    run.ledger.deal(dealer.target, 2)  # the first dealer writes on, untouched


def _writer_lock_fds(pid: int) -> list[str]:
    """The descriptors of ``pid`` open on the writers' lock file (by whatever name it has now)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd).split(" (deleted)")[0].endswith(WRITER_LOCK_NAME):
                found.append(str(fd))
    return found


def _locks_out(holder: str, other: str) -> bool:
    """An exclusive flock on ``holder``'s file keeps one on ``other``'s file out: one lock."""
    a, b = os.open(holder, os.O_RDWR), os.open(other, os.O_RDWR)
    try:
        fcntl.flock(a, fcntl.LOCK_EX)  # a writer may hold it for a batch: it waits that long
        try:
            fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(a)
        os.close(b)


def test_deleting_the_writers_lock_file_does_not_let_a_replaced_worker_write_beside_another(
    run: FaultRun,
) -> None:
    """``serve --processes 2``, the writers' lock file deleted, then a worker hangs and is killed
    and replaced: the replacement takes turns on the same lock as the live worker (it opened no new
    file by the name), and the group deals on."""
    dealer = run.start("--processes", "2", "--worker-timeout", "2", lifetime=30)
    run.ledger.deal(dealer.target, 4)
    (run.data_dir / WRITER_LOCK_NAME).unlink()
    live, hung = worker_pids(dealer)
    os.kill(hung, signal.SIGSTOP)
    line = wait_for("the supervisor's line", lambda: lines(dealer, "stopped answering"), timeout=30)
    new = int(line[0].rsplit("started pid ", 1)[1].split()[0])
    replacement = wait_for("the replacement's writers' lock", lambda: _writer_lock_fds(new), timeout=30)
    assert _locks_out(_writer_lock_fds(live)[0], replacement[0]), "the replacement locks another file"
    assert not (run.data_dir / WRITER_LOCK_NAME).exists()
    before = len(run.ledger.closed)
    deadline = time.monotonic() + 60
    while len(run.ledger.closed) < before + 6 and time.monotonic() < deadline:
        run.ledger.deal(dealer.target, 1)
    assert len(run.ledger.closed) >= before + 6, "the group did not deal again"
