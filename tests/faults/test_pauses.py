"""A dealer that stops running for longer than a hand's lifetime: stopped (downtime), or paused
whole (SIGSTOP, as a VM pause or a stalled host does). Either way the log must never show a hand
left open while the dealer dealt on: the overdue hands are voided before the next entry."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from fairdeck.log.logentry import VOIDED, CommitEntry, RevealEntry, decode
from tests.support.faults import FaultRun, lines, wait_for, worker_pids
from tests.support.waits import outlast


def test_downtime_longer_than_the_lifetime_is_pending_not_deck_shopping(run: FaultRun) -> None:
    """Hands open, the dealer stops cleanly and stays down past their lifetime: the audit (on the
    true clock) says they are pending. Started again, the dealer voids them before it logs anything
    else, then deals on."""
    dealer = run.start(lifetime=2)
    opened = run.ledger.open(dealer.target, 3)
    run.ledger.deal(dealer.target, 1)
    dealer.terminate()
    outlast(2.5)  # down past the lifetime
    audit = run.audit()
    assert audit.rc == 0 and audit.report["findings"] == [], audit.out
    assert audit.report["open_within_lifetime"] == 3
    size = len(run.entries())

    dealer = run.start(lifetime=2)
    run.ledger.deal(dealer.target, 2)
    run.stop()
    after = [decode(e) for e in run.entries()[size:]]
    voids = [i for i, e in enumerate(after) if isinstance(e, RevealEntry) and e.outcome == VOIDED]
    commits = [i for i, e in enumerate(after) if isinstance(e, CommitEntry)]
    assert {after[i].hand_id for i in voids} == set(opened)
    assert max(voids) < min(commits), "a hand was dealt before the overdue ones were voided"


def test_a_paused_dealer_voids_before_it_logs_again(run: FaultRun) -> None:
    """SIGSTOP for longer than the lifetime, with calls arriving meanwhile: when it resumes, the
    overdue hands are voided before any of those calls logs an entry. The log is read once the
    dealer is stopped: the hands must still be open then (the reaper voids a hand open 3.5 s, the
    lifetime less its margin: 4 s, so a loaded machine's slow opens still leave them open), or the
    run set nothing up, and says so rather than pass."""
    dealer = run.start(lifetime=4)
    opened = run.ledger.open(dealer.target, 3)
    dealer.signal(signal.SIGSTOP)
    try:
        wait_for("every thread of the dealer stopped", lambda: _stopped(dealer.pid), every=0.01)
        before = [decode(e) for e in run.entries()]  # all it logged before the pause
        early = {e.hand_id for e in before if isinstance(e, RevealEntry)} & set(opened)
        assert not early, f"{len(early)} of the hands voided before the pause: the test stalled 3.5 s"
        size = len(before)
        outlast(0.5)
        callers = [threading.Thread(target=run.ledger.deal, args=(dealer.target, 1)) for _ in range(3)]
        for t in callers:
            t.start()  # they wait for the paused dealer
        outlast(4.5)  # paused past the lifetime
    finally:
        dealer.signal(signal.SIGCONT)
    for t in callers:
        t.join(timeout=30)
    wait_for("the dealt hands", lambda: len(run.ledger.closed) == 3)
    run.stop()
    after = [decode(e) for e in run.entries()[size:]]
    voids = [i for i, e in enumerate(after) if isinstance(e, RevealEntry) and e.hand_id in opened]
    commits = [i for i, e in enumerate(after) if isinstance(e, CommitEntry)]
    assert len(voids) == 3
    assert max(voids) < min(commits), "a hand was dealt before the overdue ones were voided"


def test_a_crash_under_load_then_a_restart_after_the_lifetime(run: FaultRun) -> None:
    """SIGKILL while calls are in flight (nothing drained, nothing flushed that was not on disk),
    the dealer down past the hands' lifetime, then started again: what was acknowledged is there,
    the hands left open are voided before anything else, and the audit passes."""
    dealer = run.start(lifetime=2)
    run.ledger.open(dealer.target, 3)
    killed = threading.Event()

    def keep_dealing() -> None:
        while not killed.is_set() or not run.ledger.failures:
            run.ledger.deal(dealer.target, 1)

    callers = [threading.Thread(target=keep_dealing) for _ in range(4)]
    for t in callers:
        t.start()
    wait_for("some hands dealt", lambda: len(run.ledger.closed) >= 20)
    dealer.kill9()
    killed.set()
    for t in callers:
        t.join(timeout=60)
    outlast(2.5)  # down past the lifetime
    assert run.audit().rc == 0
    dealer = run.start(lifetime=2)
    run.ledger.deal(dealer.target, 2)


def test_one_worker_paused_is_replaced_and_nothing_is_lost(run: FaultRun) -> None:
    """``serve --processes 2``, one worker paused (SIGSTOP) while the other deals and hands are
    open: the supervisor kills it and starts another in one line, dealing goes on through the
    group, and (the run's invariants) nothing acknowledged is lost and the audit passes."""
    dealer = run.start("--processes", "2", "--worker-timeout", "2", lifetime=30)
    run.ledger.open(dealer.target, 3)
    run.ledger.deal(dealer.target, 4)
    paused = worker_pids(dealer)[1]
    os.kill(paused, signal.SIGSTOP)
    try:
        line = wait_for("the supervisor's line", lambda: lines(dealer, "stopped answering"), timeout=30)
        assert len(line) == 1 and f"(pid {paused})" in line[0], line
        # New connections go to live workers again (a call the kernel gave the paused one failed,
        # and the ledger counts it as not acknowledged): some deals go through.
        before = len(run.ledger.closed)
        deadline = time.monotonic() + 60
        while len(run.ledger.closed) < before + 4 and time.monotonic() < deadline:
            run.ledger.deal(dealer.target, 1)
        assert len(run.ledger.closed) >= before + 4, "the group did not deal again"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(paused, signal.SIGCONT)


def test_the_whole_group_paused_replaces_no_one(run: FaultRun) -> None:
    """``serve --processes 2`` paused whole for longer than ``--worker-timeout`` (a container
    pause, Ctrl-Z of the group, a stalled host) and continued whole, as ``fg`` does it (one
    SIGCONT to the process group): their silence was the supervisor's own pause, so it replaces no
    one (it killed every worker, each "stopped answering for 3.x s"), and the group deals on.
    Continued one by one, a test's stall of 0.3 s between the supervisor and its workers made
    them workers stopped alone, rightly replaced; that order, with the supervisor's looks held,
    is test_the_supervisors_pause_with_its_workers_is_not_their_silence (tests/run)."""
    # setsid: the group in a process group of its own, as a shell's job is
    dealer = run.start("--processes", "2", "--worker-timeout", "2", wrap=["setsid"], lifetime=30)
    run.ledger.deal(dealer.target, 4)
    workers = worker_pids(dealer)
    assert [os.getpgid(pid) for pid in (dealer.pid, *workers)] == [dealer.pid] * 3
    os.killpg(dealer.pid, signal.SIGSTOP)
    try:
        outlast(3.0)  # past the worker timeout
    finally:
        os.killpg(dealer.pid, signal.SIGCONT)
    outlast(3.0)  # longer than the worker timeout: a replacement would have happened
    assert lines(dealer, "stopped answering") == [], dealer.stderr()
    assert worker_pids(dealer) == workers and all(_alive(pid) for pid in workers)
    before = len(run.ledger.closed)
    run.ledger.deal(dealer.target, 4)
    assert len(run.ledger.closed) == before + 4


def _stopped(pid: int) -> bool:
    """Whether the kernel shows every thread of ``pid`` stopped (state T): it logs nothing more."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/task/{task}/stat", "rb") as f:
            states.append(f.read().rpartition(b")")[2].split()[0])
    return bool(states) and set(states) == {b"T"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
