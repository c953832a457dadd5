"""Storage that cannot take the dealer's writes, told apart: a data dir or database file the dealer
may not write, a read-only mount, a lock held by another process, a full disk. Each refusal is one
line with its own cause and fix, and none of them says the database is damaged or to restore a
backup (which, for a log with published checkpoints, is a fork). While running, health says
NOT_SERVING until storage takes writes again, and a SIGTERM on a full disk stops the dealer in one
line. Real files, a real tmpfs in a mount namespace (kit.Sandbox), real SQLite locks."""

from __future__ import annotations

import os
import sqlite3
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from tests.support.faults import WITHOUT_DAC, FaultRun, lines, wait_for

SERVING = health_pb2.HealthCheckResponse.SERVING


def made(run: FaultRun) -> None:
    """A data dir with a log in it, the dealer stopped."""
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)
    run.ledger.open(dealer.target, 1)
    dealer.terminate()


def health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        status: int = answer.status
        return status


def refused_in_one_line(stderr: str, *words: str) -> str:
    (line,) = stderr.strip().splitlines()
    assert line.startswith("fairdeck serve: ") and "Traceback" not in stderr
    for word in words:
        assert word in line, line
    assert "damaged" not in line.replace("not damaged", "") and "restore" not in line, line
    return line


def test_a_data_dir_the_dealer_may_not_write_is_not_called_damaged(run: FaultRun) -> None:
    made(run)
    os.chmod(run.data_dir, 0o555)
    try:
        refused = run.start_refused(wrap=WITHOUT_DAC)
        refused_in_one_line(refused, "not writable by this user", str(run.data_dir))
    finally:
        os.chmod(run.data_dir, 0o700)


def test_a_read_only_database_file_is_refused_at_start_never_serving(run: FaultRun) -> None:
    made(run)
    db = run.data_dir / "fairdeck.db"
    os.chmod(db, 0o400)
    try:
        refused_in_one_line(run.start_refused(wrap=WITHOUT_DAC), "not writable by this user", str(db))
    finally:
        os.chmod(db, 0o600)


@pytest.mark.light
def test_a_database_locked_by_another_process_is_said_so(run: FaultRun) -> None:
    made(run)
    outsider = sqlite3.connect(run.data_dir / "fairdeck.db", isolation_level=None)
    try:
        outsider.execute("BEGIN IMMEDIATE")  # an sqlite3 shell, or a backup tool, holding the write lock
        refused_in_one_line(run.start_refused(), "locked by another process", "fuser")
    finally:
        outsider.close()


def test_a_read_only_mount_at_start(run: FaultRun) -> None:
    """The data dir's file system mounted read-only (as a file system is after I/O errors): one line
    saying so, and the database is not called damaged. (Remounting it read-only under a running
    dealer is refused by Linux while the dealer holds its files open for writing, EBUSY; the kernel
    forces it only after real I/O errors on a block device. The running case of storage that takes
    no writes is the full disk, below.)"""
    sandbox = run.in_sandbox()
    made(run)
    sandbox.remount("ro")
    try:
        refused_in_one_line(run.start_refused(), "read-only file system", "remount it read-write")
    finally:
        sandbox.remount("rw")
    dealer = run.start()
    run.ledger.deal(dealer.target, 1)


def test_a_full_disk_at_start_while_running_and_at_sigterm(run: FaultRun) -> None:
    sandbox = run.in_sandbox("8m")
    made(run)
    filler = sandbox.fill()
    refused_in_one_line(run.start_refused(), "is full", "free some space")
    filler.unlink()
    dealer = run.start("--checkpoint-interval", "3600")  # the entries below are signed at SIGTERM only
    run.ledger.deal(dealer.target, 2)
    filler = sandbox.fill()
    with DealerClient(dealer.target, timeout=15, retries=0) as c, pytest.raises(FairdeckError) as refused:
        for _ in range(50):  # the WAL may have room for a few more frames
            c.open_hand("short")
    assert "the disk is full" in str(refused.value)
    wait_for("health NOT_SERVING", lambda: health(dealer.target) != SERVING)
    began = time.monotonic()
    assert dealer.terminate(timeout=30) == 0
    assert time.monotonic() - began < 20, "SIGTERM took longer than the drain bound"
    assert "Traceback" not in dealer.stderr()
    (said,) = lines(dealer, "could not be signed while stopping")
    assert "is full" in said and "Nothing acknowledged is lost" in said
    assert "the request was not recorded" not in dealer.stderr().split("draining", 1)[1]
    filler.unlink()
    dealer = run.start()
    run.ledger.deal(dealer.target, 1)


@pytest.mark.light
def test_the_write_lock_taken_by_another_process_while_dealing(run: FaultRun) -> None:
    """An sqlite3 shell (or a backup tool) takes the database's write lock while a table deals.
    Held a moment, the table's calls wait for it and are written; held past SQLite's busy wait
    (5 s), the calls fail saying so, with nothing acknowledged unwritten, health goes NOT_SERVING
    and comes back, and dealing goes on once it is let go. The run's invariants hold."""
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)
    outsider = sqlite3.connect(run.data_dir / "fairdeck.db", isolation_level=None, check_same_thread=False)
    try:
        outsider.execute("BEGIN IMMEDIATE")
        threading.Timer(1.0, outsider.execute, ("ROLLBACK",)).start()
        before = len(run.ledger.closed)
        run.ledger.deal(dealer.target, 2)  # waits for the lock, then written
        assert len(run.ledger.closed) == before + 2 and run.ledger.failures == 0
        outsider.execute("BEGIN IMMEDIATE")
        with DealerClient(dealer.target, timeout=30, retries=0) as c, pytest.raises(FairdeckError) as refused:
            c.open_hand("short")
        assert "the database is locked" in str(refused.value), refused.value
        wait_for("health NOT_SERVING", lambda: health(dealer.target) != SERVING, timeout=30)
        outsider.execute("ROLLBACK")
        wait_for("health SERVING", lambda: health(dealer.target) == SERVING, timeout=30)
        before = len(run.ledger.closed)
        run.ledger.deal(dealer.target, 2)
        assert len(run.ledger.closed) == before + 2
        assert "Traceback" not in dealer.stderr()
    finally:
        outsider.close()
