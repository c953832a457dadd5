"""Blame on evidence: what goes wrong is said with its cause, by the party it belongs to.

- The writers' lock of ``serve --processes 2`` held by an outside process: the checkpoint
  publisher says why it cannot sign (not "DealerError"), once per cause and not five times a
  second per worker; the storage probe, the dealer's own work, carries no client's request id.
- The clock behind the log at a start allowed with --allow-clock-behind-log: hand ids carry the
  log's time, as their entries do, not the wall clock's.
- The auditor's own files (a cut --since checkpoint, an empty hand file): exit 2 naming them,
  never a finding against the dealer.
"""

from __future__ import annotations

import fcntl
import os
import time

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.log.logentry import decode
from tests.support.faults import FaultRun, fairdeck, lines, wait_for

HOURS_2 = 2 * 3600


def test_a_lock_stall_is_logged_with_its_cause_once_and_not_under_a_callers_id(run: FaultRun) -> None:
    dealer = run.start("--processes", "2", "--worker-timeout", "0")
    run.ledger.deal(dealer.target, 4)
    fd = os.open(run.data_dir / "fairdeck.writer.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held by this test: the workers' writes wait, then fail
        refused = 0
        began = time.monotonic()

        def stalled_long_enough() -> bool:
            nonlocal refused
            with DealerClient(dealer.target, timeout=5) as client:
                try:
                    client.open_hand("short")  # not acknowledged: fails, or is not in the ledger
                except FairdeckError:
                    refused += 1
            # Three seconds of stall: some 15 publishing rounds per worker, each one failing.
            return refused >= 3 and time.monotonic() - began > 3 and bool(lines(dealer, "probe write failed"))

        wait_for("a stall of a few seconds", stalled_long_enough, timeout=60)
        publishing = lines(dealer, "checkpoint publishing failed")
        assert publishing, dealer.stderr()
        assert len(publishing) <= 4, "\n".join(publishing)  # once per worker (and once more after 10 s)
        for line in publishing:
            assert (
                "UNAVAILABLE (STORAGE_UNAVAILABLE): another process holds the database's writer lock" in line
            )
        for line in lines(dealer, "storage probe write failed"):
            assert "request_id=" not in line, line  # the probe is nobody's call
    finally:
        os.close(fd)
    wait_for("signing again", lambda: lines(dealer, "checkpoints are signed again"))
    run.ledger.deal(dealer.target, 2)


def test_hand_ids_carry_the_logs_time_when_the_clock_is_behind_it(run: FaultRun) -> None:
    run.clock.set(+HOURS_2)
    dealer = run.start(fake_clock=True, lifetime=60)
    run.ledger.deal(dealer.target, 2)
    dealer.terminate()
    run.clock.set(0)
    dealer = run.start("--allow-clock-behind-log", fake_clock=True, lifetime=60)
    hand_ids = run.ledger.open(dealer.target, 3)
    run.ledger.close(dealer.target, hand_ids)
    entries = run.entries()
    for hand_id in hand_ids:
        entry_ms = decode(entries[run.ledger.opened[hand_id][1]]).time_ms
        prefix_ms = int(hand_id[:11], 16)
        assert abs(prefix_ms - entry_ms) < 60_000, f"hand {hand_id}: id at {prefix_ms}, entry at {entry_ms}"


def test_the_auditors_own_files_are_not_the_dealers_fault(run: FaultRun) -> None:
    dealer = run.start()
    run.ledger.deal(dealer.target, 3)
    run.stop()
    saved = run.tmp / "audit.checkpoint"
    key = run.key()
    first = fairdeck("audit", "--data", str(run.data_dir), "--key", key, "--since", str(saved))
    assert first.rc == 0 and saved.exists(), first.out + first.err
    saved.write_bytes(saved.read_bytes()[:40])  # a disk that filled as it was saved, say
    cut = fairdeck("audit", "--data", str(run.data_dir), "--key", key, "--since", str(saved))
    assert cut.rc == 2 and "BAD" not in cut.out, cut.out
    assert cut.err.startswith(f"fairdeck audit: cannot use --since {saved}: "), cut.err
