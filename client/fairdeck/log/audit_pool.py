"""The audit's reveal checks spread over worker processes (``fairdeck audit --workers N``).

Replaying a log is sequential where it must be: the Merkle fold, the checkpoints, which hand ids
were committed and revealed. The costly part is not: each reveal's check (the seed opens the
commitment, the seeds re-derive the deck dealt; ``fairdeck.log.audit.check_reveal``) needs that
one hand alone. ``RevealChecks`` takes those checks in batches and runs them in ``workers``
processes while the auditor goes on reading; ``results`` gives every result back in the order
the checks were submitted, so the report is exactly the one-process report.

The processes are started with ``spawn``: the parent may hold threads (gRPC's, the tile
prefetchers') that ``fork`` would copy half-way. At most ``4 * workers`` batches are in flight:
memory stays flat however long the log.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from fairdeck.log.audit import CheckResult as Result
from fairdeck.log.audit import check_reveal

BATCH = 1024
Job = tuple[Any, ...]
"""``check_reveal``'s arguments."""


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


PARALLEL_FROM = 20_000
"""Entries from which worker processes pay for their start (a fraction of a second each)."""


def default_workers(entries: int) -> int:
    """Worker processes for a log of ``entries``: one per core beside the auditor's own, for a log
    long enough to be worth their start; 0 (check in the auditor's process) otherwise."""
    return available_cores() - 1 if entries >= PARALLEL_FROM else 0


def _check_batch(jobs: list[Job]) -> list[int | str]:
    return [check_reveal(*job) for job in jobs]


class RevealChecks:
    def __init__(self, workers: int, batch: int = BATCH) -> None:
        if workers < 1:
            raise ValueError("RevealChecks needs at least one worker process")
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        self._batch = batch
        self._limit = 4 * workers
        self._jobs: list[Job] = []
        self._meta: list[tuple[int, str, int]] = []
        self._flight: deque[tuple[list[tuple[int, str, int]], Future[list[int | str]]]] = deque()

    def submit(self, index: int, hand_id: str, job: Job, position: int) -> list[Result]:
        """Queue one check; the results that came back meanwhile (a batch at a time, in order)."""
        self._jobs.append(job)
        self._meta.append((index, hand_id, position))
        return self._send() if len(self._jobs) == self._batch else []

    def _send(self) -> list[Result]:
        done = self._collect_oldest() if len(self._flight) >= self._limit else []
        if self._jobs:
            self._flight.append((self._meta, self._pool.submit(_check_batch, self._jobs)))
            self._jobs, self._meta = [], []
        return done

    def _collect_oldest(self) -> list[Result]:
        meta, future = self._flight.popleft()
        return [(*m, result) for m, result in zip(meta, future.result(), strict=True)]

    def results(self) -> Iterator[Result]:
        """The rest of the results, in submission order; the pool is then shut down."""
        try:
            yield from self._send()
            while self._flight:
                yield from self._collect_oldest()
        finally:
            self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
