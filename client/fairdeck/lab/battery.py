"""Every battery on ours and on the bad generators of the same volume, each with its verdict.

A battery's table (every test of every source) is corrected together by Holm-Bonferroni at
``alpha`` (``fairdeck.stats.checks.holm``, as ``fairdeck stats``). Verdicts are ``stats``' own: OK
when ours passes and every bad generator is rejected by some test; FAILED when ours is rejected;
INCONCLUSIVE when a bad generator escaped. NIST: with several sequences, each statistic gives two
P-values, the uniformity of its sequences' P-values (chi-square over 10 bins from 55 sequences,
Kolmogorov-Smirnov below) and the proportion passing at 0.01 (binomial tail against 0.99), as SP
800-22 section 4.2. docs/certification.md, section 2, has the reasons.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from fairdeck.lab import dieharder, nist
from fairdeck.stats import analysis as stats_analysis
from fairdeck.stats import checks
from fairdeck.stats.checks import Result
from fairdeck.stats.sampling import OURS, RunSpec, rank_table, sample
from fairdeck.stats.tally import DeckTally, hash_keys

OK, FAILED, INCONCLUSIVE = stats_analysis.OK, stats_analysis.FAILED, stats_analysis.INCONCLUSIVE

Progress = Callable[[str], None]


@dataclass
class Battery:
    """One battery's table and verdict."""

    name: str
    ours: list[str]
    """The sources that are ours (they must pass)."""
    controls: list[str]
    results: list[Result]
    alpha: float
    correction: str
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def rejected_by(self, source: str) -> list[str]:
        return [r.test for r in self.results if r.source == source and r.rejected]

    def untested(self) -> list[str]:
        """Sources of ours with no result at all (too short for every test): not shown to pass."""
        return [s for s in self.ours if not any(r.source == s for r in self.results)]

    def too_small(self, source: str) -> list[str]:
        """Tests that would have rejected ``source`` but whose cells are too small to trust."""
        return checks.too_small(self.results, source, self.alpha)

    @property
    def verdict(self) -> str:
        if any(self.rejected_by(s) for s in self.ours):
            return FAILED
        if self.untested() or any(self.too_small(s) for s in self.ours):
            return INCONCLUSIVE
        if any(not self.rejected_by(c) for c in self.controls):
            return INCONCLUSIVE
        return OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "battery": self.name,
            "verdict": self.verdict,
            "alpha": self.alpha,
            "correction": self.correction,
            "ours": {s: self.rejected_by(s) for s in self.ours},
            "untested": self.untested(),
            "too_small": {s: t for s in [*self.ours, *self.controls] if (t := self.too_small(s))},
            "controls": {c: self.rejected_by(c) for c in self.controls},
            "notes": self.notes,
            "seconds": round(self.seconds, 2),
            "tests": len(self.results),
            "results": [_finite(r.as_dict()) for r in self.results],
            **self.extra,
        }


def _finite(d: dict[str, object]) -> dict[str, object]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def _result(source: str, test: str, p: float, note: str = "") -> Result:
    p = min(max(p, 0.0), 1.0)
    log10_p = math.log10(p) if p > 0 else -math.inf
    return Result(source, test, p, None, p, log10_p, note)


# --- NIST SP 800-22 -----------------------------------------------------------------------------


def nist_source(name: str, data: bytes, n: int, sequences: int) -> tuple[list[Result], int]:
    """Every statistic of ``sequences`` sequences of ``n`` bits of ``data``, combined (module doc)."""
    bits = nist.bits_from_bytes(data[: (sequences * n + 7) // 8])[: sequences * n]
    per_statistic: dict[str, list[float]] = {}
    for k in range(sequences):
        for statistic, p in nist.sequence_results(bits[k * n : (k + 1) * n]).items():
            per_statistic.setdefault(statistic, []).append(p)
    found = []
    for statistic, values in per_statistic.items():
        if sequences == 1:
            found.append(_result(name, statistic, values[0]))
            continue
        ps = np.asarray(values)
        if ps.size >= 55:
            counts = np.histogram(ps, bins=10, range=(0.0, 1.0))[0]
            uniform = float(sps.chisquare(counts).pvalue)
            how = "chi-square, 10 bins"
        else:
            uniform = float(sps.kstest(ps, "uniform").pvalue)
            how = "Kolmogorov-Smirnov"
        passed = int((ps >= 0.01).sum())
        proportion = float(sps.binom.cdf(passed, ps.size, 0.99))
        found.append(_result(name, f"{statistic} uniformity", uniform, f"{ps.size} P-values, {how}"))
        found.append(_result(name, f"{statistic} proportion", proportion, f"{passed}/{ps.size} pass at 0.01"))
    return found, sequences


def run_nist(
    ours: Mapping[str, bytes],
    controls: Mapping[str, bytes],
    *,
    n: int,
    sequences: int,
    alpha: float,
    progress: Progress | None = None,
) -> Battery:
    began = time.perf_counter()
    results: list[Result] = []
    notes = []
    for name, data in {**ours, **controls}.items():
        k = min(sequences, len(data) * 8 // n)
        if k < 1:
            notes.append(f"{name}: {len(data):,} bytes, fewer than one sequence of {n:,} bits; not run")
            continue
        found, used = nist_source(name, data, n, k)
        results += found
        notes.append(f"{name}: {used} sequence(s) of {n:,} bits")
        if progress is not None:
            progress(f"NIST SP 800-22: {name}")
    checks.holm(results, alpha)
    battery = Battery(
        "NIST SP 800-22",
        list(ours),
        list(controls),
        results,
        alpha,
        "Holm-Bonferroni over every statistic of every source (ours and the bad generators)",
        notes,
    )
    battery.seconds = time.perf_counter() - began
    return battery


# --- dieharder -------------------------------------------------------------------------------


def run_dieharder(
    ours: Mapping[str, Path],
    controls: Mapping[str, Path],
    *,
    which: str,
    alpha: float,
    workers: int,
    progress: Progress | None = None,
) -> Battery:
    """dieharder on each stream; a bad generator's run stops at its first test below alpha / m."""
    began = time.perf_counter()
    sizes = {name: path.stat().st_size for name, path in {**ours, **controls}.items()}
    steps = dieharder.plan(max(sizes.values()), which)
    counted = dieharder.rows(steps, counted_only=True)  # p-values, not runs: sts_serial prints 30
    sources = len(sizes)
    bound = alpha / max(1, counted * sources)  # Bonferroni: a p below it is rejected by Holm too
    results: list[Result] = []
    notes = []
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, path in {**ours, **controls}.items():
        stop = bound if name in controls else None
        outcomes = dieharder.run_battery(path, which, workers=workers, stop_at=stop, progress=progress)
        rows[name] = [
            {"test": o.label, "psamples": o.psamples, "p": o.p, "assessment": o.assessment, "note": o.note}
            for o in outcomes
        ]
        for o in outcomes:
            if o.counted and o.p is not None:
                results.append(
                    _result(name, o.label, o.p, f"{o.psamples} psamples; dieharder: {o.assessment}")
                )
            elif o.p is None:
                notes.append(f"{name}: {o.label} not run ({o.note})")
        if name in controls and len(outcomes) < dieharder.rows(steps):
            notes.append(
                f"{name}: stopped after {len(outcomes)} tests, rejected (p below alpha / m = {bound:.2g})"
            )
        notes.append(f"{name}: {sizes[name]:,} bytes")
    # The family is every test of the plan on every source, run or not: m is not shrunk by stopping.
    checks.holm(results, alpha)
    _holm_with_m(results, alpha, counted * sources)
    battery = Battery(
        f"dieharder ({which})",
        list(ours),
        list(controls),
        results,
        alpha,
        f"Holm-Bonferroni over every test of every source (m = {counted * sources}: tests a bad generator "
        "did not need to run count too); each test's final p read one-sided",
        notes,
        extra={"dieharder": rows},
    )
    battery.seconds = time.perf_counter() - began
    return battery


def _holm_with_m(results: Sequence[Result], alpha: float, m: int) -> None:
    """Holm-Bonferroni as ``checks.holm``, for a family of ``m`` >= len(results) tests."""
    m = max(m, len(results))
    running = 0.0
    for rank, result in enumerate(sorted(results, key=lambda r: r.log10_p)):
        scaled = min(0.0, result.log10_p + math.log10(m - rank))
        running = max(running, 10**scaled) if scaled > -300 else max(running, 0.0)
        result.p_adjusted = running
        result.rejected = running <= alpha and not result.approximate  # as checks.holm, for its reason


# --- final outcomes: fairdeck stats ---------------------------------------------------------------


def run_decks(
    decks: bytes,
    deck: str,
    n: int,
    card_bytes: int,
    *,
    seed: str,
    seed_bits: int,
    alpha: float,
    workers: int,
    progress: Progress | None = None,
) -> Battery:
    """``fairdeck stats``' tests on the collected decks, its controls at the same N."""
    began = time.perf_counter()
    dtype = np.uint8 if card_bytes == 1 else np.dtype(">u2")
    ids = np.frombuffer(decks, dtype=dtype).reshape(-1, n)
    count = ids.shape[0]
    spec = RunSpec(
        deck=deck,
        decks=count,
        small_decks=1,
        seed=seed,
        seed_bits=seed_bits,
        controls=tuple(stats_controls(seed_bits)),
        small_sizes=(),
        ours_main=False,
    )
    samples = sample(spec, workers=workers)
    tally = DeckTally.empty(n)
    keys = hash_keys(seed, n)
    ranks = rank_table(deck)
    for start in range(0, count, 200_000):
        tally.add(ranks[ids[start : start + 200_000].astype(np.intp)], keys)
    samples[OURS].main = tally
    samples[OURS].repeated = tally.repeated_decks()
    result = stats_analysis.analyse(samples, spec, alpha)
    if progress is not None:
        progress("decks: fairdeck stats")
    hints = [f"{c}: {result.hint(c, spec)}" for c in result.uncaught if result.hint(c, spec)]
    if small := result.too_small(OURS):
        hints.append(
            f"ours: {', '.join(small)} would have rejected it with under {checks.MIN_EXPECTED:g} decks "
            f"expected per cell, too few to trust either way: INCONCLUSIVE at {count:,} decks; collect more"
        )
    battery = Battery(
        "final outcomes (fairdeck stats)",
        [OURS],
        list(spec.controls),
        result.results,
        alpha,
        "Holm-Bonferroni over every test of every source, as fairdeck stats",
        [f"{count:,} dealt {deck} decks from final/decks.bin; each control dealt {count:,} decks", *hints],
    )
    battery.seconds = time.perf_counter() - began
    return battery


def stats_controls(seed_bits: int) -> list[str]:
    from fairdeck.stats.batch import controls

    return list(controls(seed_bits=seed_bits))
