"""Entry times never go backwards within a log: under concurrent dealing, and across the processes
of ``serve --processes`` writing one SQLite file (whose clocks are read apart)."""

from __future__ import annotations

import itertools
import threading

import pytest

from fairdeck.log.logentry import decode
from tests.support.faults import FaultRun


def deal_concurrently(run: FaultRun, target: str, threads: int = 8, hands: int = 25) -> None:
    workers = [threading.Thread(target=run.ledger.deal, args=(target, hands)) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)


@pytest.mark.parametrize("processes", [1, 2])
def test_entry_times_never_go_backwards_under_load(run: FaultRun, processes: int) -> None:
    dealer = run.start("--processes", str(processes), lifetime=60)
    deal_concurrently(run, dealer.target)
    run.stop()
    times = [decode(e).time_ms for e in run.entries()]
    backwards = sum(1 for a, b in itertools.pairwise(times) if b < a)
    assert len(times) == 2 * 8 * 25
    assert backwards == 0, f"{backwards} of {len(times) - 1} adjacent entries go back in time"
