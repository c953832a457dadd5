"""Where the decks come from, and the worker processes that count them.

Sources: ``ours`` (fairdeck's own derivation, in process, from counter seeds that make a run a
function of ``--seed``), a control (``fairdeck.stats.batch``) or a live dealer
(``fairdeck.stats.remote``, in the parent). Work is cut into chunks of fixed size, so the decks
do not depend on how many workers run them; each chunk is counted into a tally in a worker and
the parent adds the tallies up. The seeds, and what the parent keeps in memory:
docs/stats/README.md, "Where the decks come from".
"""

from __future__ import annotations

import hashlib
import multiprocessing
import time
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cache
from itertools import chain

import numpy as np
import numpy.typing as npt

from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import Plan, plan
from fairdeck.core.encoding import lp
from fairdeck.core.seeds import server_seed_length
from fairdeck.core.shuffle import shuffler
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.stats.batch import SEED_BITS, GeneratorDraws, controls
from fairdeck.stats.tally import DeckTally, PermTally, hash_keys

OURS = "ours"
SMALL_SIZES = (3, 4, 5)
CHUNK = {"ours": 20_000, "ours-small": 50_000, "control": 50_000}
"""Decks per job. Fixed, so results do not depend on the number of workers."""

_COST_US = {"ours": 11.0, "ours-small": 4.5, "control": 3.5, "control-small": 1.0}
"""Rough µs per 52-card deck, only to weigh progress."""


@dataclass(frozen=True)
class RunSpec:
    """What to deal: every parameter that decides the decks."""

    deck: str
    decks: int
    small_decks: int
    seed: str
    seed_bits: int = SEED_BITS
    controls: tuple[str, ...] = ()
    small_sizes: tuple[int, ...] = SMALL_SIZES
    ours_main: bool = True
    """Deal ours' full decks in process (False when a live dealer supplies them)."""


@dataclass(frozen=True)
class Job:
    source: str
    cards: int
    small: bool
    start: int
    count: int

    @property
    def kind(self) -> str:
        base = "ours" if self.source == OURS else "control"
        return base + ("-small" if self.small else "")

    @property
    def cost(self) -> float:
        scale = 1.0 if self.small else self.cards / 52
        return self.count * _COST_US[self.kind] * scale


@dataclass
class Sample:
    """Everything counted for one source."""

    source: str
    main: DeckTally | None = None
    small: dict[int, PermTally] = field(default_factory=dict)
    repeated: int | None = None
    cpu_seconds: float = 0.0


def jobs_for(spec: RunSpec) -> list[Job]:
    """Every chunk of work of a run, in a stable order: ours first, then each control."""
    n = DeckSpec.parse(spec.deck).size
    jobs: list[Job] = []
    for source in (OURS, *spec.controls):
        kind = "ours" if source == OURS else "control"
        if source != OURS or spec.ours_main:
            size = CHUNK[kind]
            jobs += [Job(source, n, False, s, min(size, spec.decks - s)) for s in range(0, spec.decks, size)]
        size = CHUNK["ours-small" if source == OURS else "control"]
        for k in spec.small_sizes:
            jobs += [
                Job(source, k, True, s, min(size, spec.small_decks - s))
                for s in range(0, spec.small_decks, size)
            ]
    return jobs


# --- our decks ----------------------------------------------------------------


@cache
def small_plan(n: int, version: str = CURRENT_VERSION) -> Plan:
    """A ``Plan`` for an ``n``-card deck named ``perm-<n>``: the real ``Plan.derive`` at any size."""
    spec = DeckSpec(f"perm-{n}", tuple(range(n)))
    return Plan(
        spec, shuffler(n), lp(f"{version} stream".encode()), lp(spec.name.encode()), server_seed_length(spec)
    )


def seed_prefix(seed: str, deck: str, length: int) -> bytes:
    """The first ``length - 8`` bytes of every server seed of a run.

    The seed rule: docs/stats/README.md, "Where the decks come from".
    """
    label = lp(b"fairdeck-stats server seed") + lp(seed.encode()) + lp(deck.encode())
    return hashlib.shake_256(label).digest(length - 8)


def server_seed(seed: str, deck: str, i: int, length: int) -> bytes:
    """The server seed of deck ``i`` of a run: the run's prefix, then ``u64(i)``."""
    return seed_prefix(seed, deck, length) + i.to_bytes(8, "big")


@cache
def rank_table(deck: str) -> npt.NDArray[np.int16]:
    """``table[card id]`` = the card's index in the spec's canonical order."""
    ids = DeckSpec.parse(deck).card_ids if not deck.startswith("perm-") else tuple(range(int(deck[5:])))
    table = np.full(max(ids) + 1, -1, dtype=np.int16)
    table[list(ids)] = np.arange(len(ids), dtype=np.int16)
    return table


def decks_to_ranks(decks: list[tuple[int, ...]], deck: str) -> npt.NDArray[np.int16]:
    """Dealt decks (card ids) as an array of card ranks, one row per deck."""
    n = len(decks[0]) if decks else 0
    if n and max(decks[0]) < 256:
        flat = np.frombuffer(b"".join(map(bytes, decks)), dtype=np.uint8)
    else:
        flat = np.frombuffer(array("H", chain.from_iterable(decks)), dtype=np.uint16)
    return rank_table(deck)[flat].reshape(len(decks), n)


def ours_decks(spec: RunSpec, job: Job) -> npt.NDArray[np.int16]:
    """Decks ``start .. start + count - 1`` of ours (docs/stats/README.md, "Where the decks come from")."""
    name = f"perm-{job.cards}" if job.small else spec.deck
    p = small_plan(job.cards) if job.small else plan(CURRENT_VERSION, spec.deck)
    derive, prefix = p.derive, seed_prefix(spec.seed, name, p.seed_bytes)
    decks = [
        derive(f"stats-{i}", prefix + i.to_bytes(8, "big"), ())
        for i in range(job.start, job.start + job.count)
    ]
    return decks_to_ranks(decks, name)


# --- controls -------------------------------------------------------------------


def control_draws(spec: RunSpec, job: Job) -> GeneratorDraws:
    """The randomness of one control chunk: a function of the seed, the control and the chunk."""
    label = b"fairdeck-stats control\0" + spec.seed.encode() + b"\0" + job.source.encode()
    entropy = int.from_bytes(hashlib.sha256(label).digest(), "big")
    sequence = np.random.SeedSequence(entropy, spawn_key=(job.cards, int(job.small), job.start))
    return GeneratorDraws(np.random.Generator(np.random.PCG64(sequence)))


def control_decks(spec: RunSpec, job: Job) -> npt.NDArray[np.int16]:
    control = controls(seed_bits=spec.seed_bits)[job.source]
    return control.deal(job.cards, job.count, control_draws(spec, job))


# --- workers ----------------------------------------------------------------------


def run_job(spec: RunSpec, job: Job) -> tuple[Job, DeckTally | PermTally, float]:
    """Deal and count one chunk (in a worker process); returns its tally and CPU time."""
    began = time.process_time()
    ranks = ours_decks(spec, job) if job.source == OURS else control_decks(spec, job)
    tally: DeckTally | PermTally
    if job.small:
        tally = PermTally.empty(job.cards)
        tally.add(ranks)
    else:
        tally = DeckTally.empty(job.cards)
        tally.add(ranks, hash_keys(spec.seed, job.cards))
    return job, tally, time.process_time() - began


Progress = Callable[[float, int, str], None]
"""Called after each chunk with the fraction of the estimated work done (weighed by cost, so
that it is a fair base for the time left), the decks that chunk counted, and its source."""


def _results(
    spec: RunSpec, jobs: list[Job], workers: int
) -> Iterator[tuple[Job, DeckTally | PermTally, float]]:
    if workers <= 1:
        for job in jobs:
            yield run_job(spec, job)
        return
    # spawn: a forked child would inherit gRPC's threads (--target) and the caller's locks.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: set[Future[tuple[Job, DeckTally | PermTally, float]]] = set()
        queue = iter(jobs)
        # Keep a bounded number in flight so finished tallies never pile up in the queue.
        for job in queue:
            pending.add(pool.submit(run_job, spec, job))
            if len(pending) >= 3 * workers:
                break
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                nxt = next(queue, None)
                if nxt is not None:
                    pending.add(pool.submit(run_job, spec, nxt))


def sample(spec: RunSpec, *, workers: int = 1, progress: Progress | None = None) -> dict[str, Sample]:
    """Deal and count every source of ``spec``; ours and each control, by name."""
    jobs = jobs_for(spec)
    total = sum(job.cost for job in jobs) or 1.0
    remaining: dict[str, int] = {}
    for job in jobs:
        if not job.small:
            remaining[job.source] = remaining.get(job.source, 0) + 1
    samples = {source: Sample(source) for source in (OURS, *spec.controls)}
    done = 0.0
    for job, tally, cpu in _results(spec, jobs, workers):
        s = samples[job.source]
        s.cpu_seconds += cpu
        if isinstance(tally, PermTally):
            if job.cards in s.small:
                s.small[job.cards].merge(tally)
            else:
                s.small[job.cards] = tally
        else:
            if s.main is None:
                s.main = tally
            else:
                s.main.merge(tally)
            remaining[job.source] -= 1
            if remaining[job.source] == 0:  # last chunk in: count duplicates, drop the hashes
                s.repeated = s.main.repeated_decks()
        done += job.cost
        if progress is not None:
            progress(done / total, job.count, job.source)
    return samples
