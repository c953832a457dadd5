"""The dealer's WAL beside other processes that open its database while it deals: an audit with
``--data`` (or a backup) opening the live file must not disturb the dealer's wal-index, whose
locks it keeps for as long as it runs (storage/sqlite/checkpointer.py reads the -shm's header).
And on a full disk, where the WAL still takes writes but its checkpoints cannot grow the database:
said once, and the WAL restarts once space is back."""

from __future__ import annotations

import os
import threading
import time

from tests.faults.kit import FaultRun, lines, wait_for


def test_audits_of_a_live_dealer_under_load_leave_it_dealing(run: FaultRun) -> None:
    """Calls in flight while ``fairdeck audit --data`` opens the live database again and again: the
    dealer never fails a call, logs no error, and the audits find nothing."""
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)
    time.sleep(0.5)  # a signed checkpoint covers the log (--checkpoint-interval 0.05)
    stop = threading.Event()

    def keep_dealing() -> None:
        while not stop.is_set():
            run.ledger.deal(dealer.target, 1)

    callers = [threading.Thread(target=keep_dealing) for _ in range(3)]
    for t in callers:
        t.start()
    try:
        for _ in range(15):
            audit = run.audit()
            assert audit.rc == 0 and audit.report["findings"] == [], audit.out or audit.err
    finally:
        stop.set()
        for t in callers:
            t.join(timeout=60)
    assert dealer.alive(), f"the dealer died (exit {dealer.proc.returncode}): {dealer.stderr()[-2000:]}"
    assert run.ledger.failures == 0, dealer.stderr()
    assert lines(dealer, "ERROR") == [] and lines(dealer, "Traceback") == [], dealer.stderr()


def test_checkpoints_on_a_full_disk_are_said_once_and_resume(run: FaultRun) -> None:
    """The WAL restarted, then the disk filled: new frames overwrite the WAL's start (no new space),
    so dealing goes on, but copying them needs the database to grow and fails. One line says so
    (not one per connection that checkpoints), one that it works again, and the WAL restarts."""
    sandbox = run.in_sandbox("16m")
    dealer = run.start()
    run.ledger.deal(dealer.target, 300)
    time.sleep(1.5)  # copied
    run.ledger.deal(dealer.target, 1)  # restarts the WAL
    time.sleep(1.5)
    wal = run.outside_data / "fairdeck.db-wal"
    before = os.path.getsize(wal)
    filler = sandbox.fill()
    for _ in range(10):
        run.ledger.deal(dealer.target, 3)
        time.sleep(0.25)  # past the writer's FORCE_S too
    wait_for("the failure said", lambda: lines(dealer, "WAL checkpoint failed"))
    filler.unlink()
    run.ledger.deal(dealer.target, 40)
    time.sleep(1.5)
    run.ledger.deal(dealer.target, 40)
    wait_for("the recovery said", lambda: lines(dealer, "WAL checkpoints succeed again"))
    assert dealer.alive() and run.ledger.failures == 0, dealer.stderr()
    assert len(lines(dealer, "WAL checkpoint failed")) == 1, lines(dealer, "WAL checkpoint")
    assert len(lines(dealer, "WAL checkpoints succeed again")) == 1, lines(dealer, "WAL checkpoint")
    assert os.path.getsize(wal) <= before, "the WAL did not restart once space was back"
    assert lines(dealer, "Traceback") == []
