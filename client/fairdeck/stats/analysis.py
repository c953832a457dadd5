"""From counts to verdicts: every test on every source, one correction for all.

Ours must pass every test and each control must be rejected by at least one, "rejected" meaning a
Holm-Bonferroni adjusted p-value at most ``alpha`` over the whole table. A run is OK when ours
passes, every control is caught and (with ``--target``) every dealt hand verified; FAILED when
ours is rejected or a hand did not verify; otherwise INCONCLUSIVE at this N (a control escaped,
or a test too small to trust, cells under 5 expected decks, would have rejected ours). Each
verdict has its exit status. Why: docs/stats/README.md, "From counts to verdicts".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fairdeck.stats import checks, exact
from fairdeck.stats.checks import Result
from fairdeck.stats.sampling import OURS, RunSpec, Sample

MAIN_TESTS = ("position", "pairs", "successions", "rising", "duplicates")

OK, FAILED, INCONCLUSIVE = "ok", "failed", "inconclusive"
EXIT_STATUS = {OK: 0, FAILED: 1, INCONCLUSIVE: 3}
"""``fairdeck stats``' exit status for each verdict (2 stays the usage error's)."""


def source_results(sample: Sample, spec: RunSpec) -> list[Result]:
    """Every test of one source, unadjusted."""
    found: list[Result] = []
    main = sample.main
    if main is not None and main.decks:
        n, name = main.n, sample.source
        found.append(checks.position_test(name, main.position))
        found.append(checks.pair_test(name, main.pairs))
        found.append(
            checks.histogram_test(name, "successions", main.successions, exact.succession_probabilities(n), 0)
        )
        found.append(
            checks.histogram_test(name, "rising", main.rising, exact.rising_sequence_probabilities(n), 1)
        )
        bits = spec.seed_bits if name.startswith("seeded_32bit") else None
        repeated = sample.repeated if sample.repeated is not None else main.repeated_decks()
        found.append(checks.duplicate_test(name, main.decks, repeated, n, reachable_bits=bits))
    for k in sorted(sample.small):
        tally = sample.small[k]
        found.append(checks.permutation_test(sample.source, tally.counts(), k, tally.impossible()))
    return found


def why_not_caught(control: str, spec: RunSpec) -> str:
    """A line on why a control escaped at this N, when the reason is known (else empty)."""
    if not control.startswith("seeded_32bit"):
        return ""
    expected = math.comb(spec.decks, 2) / 2**spec.seed_bits
    return (
        f"only repeated decks show a {spec.seed_bits}-bit seed, and {expected:.2g} are expected among "
        f"{spec.decks:,} decks (C(N, 2) / 2^{spec.seed_bits}); use a larger N (about 200,000 at 32 bits) "
        "or --seed-bits to shrink its state"
    )


@dataclass
class Analysis:
    results: list[Result]
    alpha: float
    ours_failed: list[str]
    """Tests that rejected ours (empty when ours passes)."""
    caught: dict[str, list[str]]
    """For each control, the tests that rejected it."""
    problems: list[str] = field(default_factory=list)
    """Anything else that fails the run (hands that did not verify)."""

    @property
    def ours_passes(self) -> bool:
        return not self.ours_failed

    @property
    def ok(self) -> bool:
        return self.verdict == OK

    @property
    def uncaught(self) -> list[str]:
        """The controls no test rejected."""
        return [control for control, tests in self.caught.items() if not tests]

    def too_small(self, source: str) -> list[str]:
        """Tests of ``source`` that would have rejected it but are approximate at this N."""
        return checks.too_small(self.results, source, self.alpha)

    def hint(self, control: str, spec: RunSpec) -> str:
        """Why a control escaped: the known reason at this N, and tests too small to count (else empty)."""
        small = self.too_small(control)
        found = [why_not_caught(control, spec)]
        if small:
            found.append(
                f"{', '.join(small)} would catch it, with under {checks.MIN_EXPECTED:g} decks expected per "
                "cell: too few to count"
            )
        return "; ".join(h for h in found if h)

    @property
    def verdict(self) -> str:
        """FAILED beats INCONCLUSIVE: a rejected or unverified deal is a failure at any N.

        A test too small to trust that would have rejected ours is neither a pass nor a failure.
        """
        if not self.ours_passes or self.problems:
            return FAILED
        return INCONCLUSIVE if self.uncaught or self.too_small(OURS) else OK


def analyse(samples: dict[str, Sample], spec: RunSpec, alpha: float) -> Analysis:
    """Run every test on every source and apply the verdict rules."""
    results = [r for sample in samples.values() for r in source_results(sample, spec)]
    checks.holm(results, alpha)
    ours_failed = [r.test for r in results if r.source == OURS and r.rejected]
    caught = {
        source: [r.test for r in results if r.source == source and r.rejected]
        for source in samples
        if source != OURS
    }
    return Analysis(results, alpha, ours_failed, caught)
