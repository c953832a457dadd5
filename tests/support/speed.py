"""How much slower than usual this machine runs right now, for the tests that hold the product's own
work to a time bar. ``slowdown()`` times a fixed CPU workload in this thread, a few times, at the
moment it is asked, and divides by the least of what the workload took in CPU here and what it
takes on an idle machine of the kind the suite is written for (REFERENCE_S): busy neighbours
(a share of the cores) and a slower machine both show. ``scaled(bar)`` is a bar times that.
Invariants: the factor is at least 1 (a fast machine keeps the written bar) and at most CAP;
a bar is scaled only for the work inside it, never the part a product timer sets (a deadline,
a lifetime, a grace); ``under`` keeps a scaled bar below the least time the bug it guards takes,
so that no slowdown lets the bug pass. FAIRDECK_SLOWDOWN=N sets the factor instead of measuring
(to check that a test still fails on a broken product at the largest factor, CAP)."""

from __future__ import annotations

import os
import statistics
import time

REFERENCE_S = 0.040
"""One run of the workload on an idle machine of the kind (2 cores of a recent x86 server)."""
CAP = 5.0
"""The largest factor: past it a test may fail, the machine being too slow for a time bar."""
RUNS = 5
WORK = 800_000
FORCED = "FAIRDECK_SLOWDOWN"


def _one_run() -> tuple[float, float]:
    """(wall, CPU) seconds of one run of the workload in this thread."""
    wall, cpu = time.perf_counter(), time.thread_time()
    total = 0
    for i in range(WORK):
        total += i * i % 7
    return time.perf_counter() - wall, time.thread_time() - cpu


def slowdown() -> float:
    """How many times longer the workload takes now than it should, within 1 and CAP."""
    forced = os.environ.get(FORCED)
    if forced:
        return min(CAP, max(1.0, float(forced)))
    runs = [_one_run() for _ in range(RUNS)]
    wall = statistics.median(w for w, _ in runs)
    least = min(REFERENCE_S, *(cpu for _, cpu in runs))
    return min(CAP, max(1.0, wall / least))


def scaled(bar: float, *, under: float | None = None) -> float:
    """``bar`` seconds times ``slowdown()``, but less than ``under`` where given: the least time
    the bug the bar guards takes (a product timer it must wait out), which no slowdown shortens."""
    value = bar * slowdown()
    return value if under is None else min(value, under)
