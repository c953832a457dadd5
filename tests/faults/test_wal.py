"""The dealer's WAL beside other processes that open its database while it deals: an audit with
``--data`` (or a backup) opening the live file again and again must not disturb the dealer's
wal-index, whose locks it keeps for as long as it runs. A checkpointer that read the -shm's header
by opening and closing it (2026-11-28, not kept) dropped them, and the dealer died of SIGBUS."""

from __future__ import annotations

import threading

from fairdeck.client.audit_client import AuditClient
from tests.support.faults import FaultRun, lines
from tests.support.waits import wait_for


def test_audits_of_a_live_dealer_under_load_leave_it_dealing(run: FaultRun) -> None:
    """Calls in flight while ``fairdeck audit --data`` opens the live database again and again: the
    dealer never fails a call, logs no error, and the audits find nothing."""
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)
    size = len(run.entries())
    with AuditClient(dealer.target, verifier=run.key()) as log:  # --checkpoint-interval 0.05
        wait_for("a signed checkpoint of the whole log", lambda: log.checkpoint().size >= size)
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
