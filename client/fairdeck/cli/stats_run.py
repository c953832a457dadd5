"""``fairdeck stats`` once its arguments are parsed: sample, test, report, print.

"Analysed" in the timings means everything: dealing ours and every control
at the same N, counting, testing, drawing the charts and writing the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from fairdeck.cli import cli_credentials, progress
from fairdeck.client.exceptions import FairdeckError
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.stats import report
from fairdeck.stats.analysis import EXIT_STATUS, INCONCLUSIVE, Analysis, analyse
from fairdeck.stats.batch import BatchControl, controls
from fairdeck.stats.checks import MIN_EXPECTED, Result
from fairdeck.stats.remote import DealerSample, sample_dealer
from fairdeck.stats.sampling import OURS, RunSpec, Sample, sample


class Bar:
    """The bar of the local sampling: the share of the estimated work done, the time left, and
    the decks counted per second.

    The bar moves by the work's estimated cost, not by decks, because a 52-card deck of ours
    costs ten times a control's 5-card one: counted in decks, the time left would be wrong by
    as much. The rate is in decks, which is what a reader wants to know.
    """

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.shown = progress.bar(
            total=100.0,
            desc="stats",
            unit="%",
            stream=stream,
            enabled=enabled,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]",
        )
        self.decks = 0
        self.percent = 0.0

    def __call__(self, fraction: float, decks: int, what: str) -> None:
        self.decks += decks
        percent = 100.0 * min(fraction, 1.0)
        elapsed = self.shown.format_dict["elapsed"]
        rate = f"{self.decks / elapsed:,.0f} decks/s" if elapsed > 0 else "? decks/s"
        self.shown.set_postfix_str(f"{rate}, {what}", refresh=False)
        self.shown.update(percent - self.percent)
        self.percent = percent

    def done(self) -> None:
        self.shown.close()


def _version() -> str:
    try:
        return metadata.version("fairdeck")
    except metadata.PackageNotFoundError:
        return "unknown"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def descriptions(spec: RunSpec, targets: list[str], found: Mapping[str, BatchControl]) -> dict[str, str]:
    """What each source is, for the report."""
    if targets:
        ours = (
            f"{spec.decks:,} {spec.deck} decks dealt by the live dealer at {', '.join(targets)} (DealHands, "
            "closed), each verified against its commitment; the 3-5-card samples come from the in-process "
            "derivation (the dealer deals no such decks)"
        )
    else:
        ours = (
            "fairdeck's derivation in process (Plan.derive: SHAKE-256 stream, one uniform index below n! by "
            f"rejection, Durstenfeld), hand ids stats-<i>, server seeds from --seed {spec.seed!r}"
        )
    described = {OURS: ours}
    for name in spec.controls:
        control = found[name]
        if control.in_controls:
            described[name] = (
                f"{control.bug} (fairdeck.stats.controls; vectorised, tested deck for deck against it)"
            )
        else:
            described[name] = f"{control.bug}; vectorised, tested against the exact GSR distribution"
    return described


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def as_json(analysis: Analysis, info: Mapping[str, Any], path: Path) -> dict[str, Any]:
    return {
        "ok": analysis.ok,
        "verdict": analysis.verdict,
        "ours_passes": analysis.ours_passes,
        "ours_rejected_by": analysis.ours_failed,
        "too_small": {
            s: t for s in dict.fromkeys(r.source for r in analysis.results) if (t := analysis.too_small(s))
        },
        "caught": analysis.caught,
        "problems": analysis.problems,
        "alpha": analysis.alpha,
        "correction": "holm-bonferroni over every test of every source",
        "parameters": dict(info),
        "results": [{k: _finite(v) for k, v in r.as_dict().items()} for r in analysis.results],
        "report": str(path),
    }


def summary(analysis: Analysis, spec: RunSpec, sources: list[str], out: TextIO) -> None:
    """The terminal table: adjusted p-values, tests across, sources down (✗: rejected)."""
    m = len(analysis.results)
    tests = list(dict.fromkeys(r.test for r in analysis.results))
    cells: dict[tuple[str, str], Result] = {(r.source, r.test): r for r in analysis.results}
    width = max(len(report.label(s)) for s in sources) + 2
    print(" " * width + "".join(f" {t:>11}" for t in tests), file=out)
    for source in sources:
        row = report.label(source).ljust(width)
        for test in tests:
            r = cells.get((source, test))
            text = (
                ""
                if r is None
                else ("✗ " if r.rejected else "~ " if r.approximate else "")
                + report.format_p(report.adjusted_log10(r, m), r.p_adjusted)
            )
            row += " " + f"{text:>11}"  # a space even when a p-value is wider than its column
        print(row, file=out)
    print(
        f"(Holm-adjusted p over all {m} tests; ✗: rejected at alpha = {analysis.alpha:g}; "
        f"~: under {MIN_EXPECTED:g} decks expected per cell, too few to reject)",
        file=out,
    )
    if analysis.ours_passes and analysis.too_small(OURS):
        print(f"ours: not rejected; too few decks to trust {', '.join(analysis.too_small(OURS))}", file=out)
    elif analysis.ours_passes:
        print("ours: passes every test", file=out)
    else:
        print(f"ours: REJECTED by {', '.join(analysis.ours_failed)}", file=out)
    for control, caught in analysis.caught.items():
        if caught:
            print(f"{control}: caught by {', '.join(caught)}", file=out)
        else:
            hint = analysis.hint(control, spec)
            print(f"{control}: NOT CAUGHT" + (f" ({hint})" if hint else ""), file=out)
    for problem in analysis.problems:
        print(f"FAILED: {problem}", file=out)


def run(args: argparse.Namespace) -> int:
    started = datetime.now(UTC)
    began = time.perf_counter()
    load_before = _load()
    found = controls(seed_bits=args.seed_bits)
    chosen = _chosen_controls(args.controls, list(found))
    if chosen is None:
        print(
            f"fairdeck stats: --controls takes 'all', 'none' or names from: {', '.join(found)}",
            file=sys.stderr,
        )
        return 2
    targets: list[str] = args.target or []
    spec = RunSpec(
        deck=args.deck,
        decks=args.decks,
        small_decks=args.small_decks or args.decks,
        seed=args.seed,
        seed_bits=args.seed_bits,
        controls=tuple(chosen),
        ours_main=not targets,
    )
    show = progress.wanted(args.progress, stream=sys.stderr, json=args.json)
    problems: list[str] = []
    dealer = None
    if targets:
        try:
            dealer = _sample_dealer(args, spec, targets, show)
        except (OSError, ValueError, RuntimeError, FairdeckError) as e:
            print(f"fairdeck stats: could not sample the dealer: {e}", file=sys.stderr)
            return 1
        if dealer.failed:
            listed = "; ".join(dealer.failures)
            problems.append(f"{dealer.failed:,} of {spec.decks:,} dealt hands did not verify: {listed}")
    bar = Bar(sys.stderr, show)
    try:
        samples = sample(spec, workers=args.workers, progress=bar)
    finally:
        bar.done()
    if dealer is not None:
        samples[OURS].main = dealer.tally
        samples[OURS].repeated = dealer.tally.repeated_decks()
    sampled = time.perf_counter()
    analysis = analyse(samples, spec, args.alpha)
    analysis.problems.extend(problems)
    analysed = time.perf_counter()
    pictures = report.charts(samples, analysis)
    info = _info(args, spec, samples, started, load_before, targets, dealer)
    info["seconds: dealing and counting"] = round(sampled - began, 2)
    info["seconds: tests"] = round(analysed - sampled, 2)
    hints = {c: analysis.hint(c, spec) for c, caught in analysis.caught.items() if not caught}
    document = report.render(analysis, pictures, info, descriptions(spec, targets, found), hints)
    out = Path(args.out)
    path = report.write(out, pictures, document)
    total = time.perf_counter() - began
    info["seconds: charts and report"] = round(time.perf_counter() - analysed, 2)
    info["seconds: total"] = round(total, 2)
    document = report.render(analysis, pictures, info, descriptions(spec, targets, found), hints)
    path.write_text(document, encoding="utf-8")
    results = as_json(analysis, info, path)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(
            f"fairdeck stats: {spec.decks:,} {spec.deck} decks per source "
            f"({spec.small_decks:,} per 3/4/5-card test), "
            f"seed {spec.seed!r}, {len(samples)} sources, {len(analysis.results)} tests, {total:.1f} s"
        )
        summary(analysis, spec, list(samples), sys.stdout)
        print(f"report: {path}")
        print(verdict_line(analysis))
    return EXIT_STATUS[analysis.verdict]


def verdict_line(analysis: Analysis) -> str:
    """The last line printed: OK, FAILED, or why the run is inconclusive at this N."""
    if analysis.verdict == INCONCLUSIVE:
        reasons = []
        if analysis.uncaught:
            reasons.append(
                f"{', '.join(analysis.uncaught)} went uncaught, so these tests are not shown able to see "
                "that defect"
            )
        if analysis.too_small(OURS):
            reasons.append(
                f"{', '.join(analysis.too_small(OURS))} would have rejected ours with under "
                f"{MIN_EXPECTED:g} decks expected per cell, too few to trust either way"
            )
        return (
            f"INCONCLUSIVE at this N: ours passes every test, but {'; and '.join(reasons)}; run a larger -n"
        )
    return analysis.verdict.upper()


def _chosen_controls(text: str, known: list[str]) -> list[str] | None:
    """The controls named by --controls (a name without its ``@...`` suffix matches too)."""
    if text == "all":
        return known
    if text == "none":
        return []
    by_base = {name.split("@")[0]: name for name in known} | {name: name for name in known}
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [by_base[name] for name in names] if names and all(name in by_base for name in names) else None


def _sample_dealer(args: argparse.Namespace, spec: RunSpec, targets: list[str], show: bool) -> DealerSample:
    c = cli_credentials.from_args(args)
    # Every hand costs the same round trip here, so the bar counts hands, and tqdm's rate is theirs.
    with progress.bar(
        total=spec.decks, desc="stats: dealer", unit=" hands", stream=sys.stderr, enabled=show
    ) as shown:
        return sample_dealer(
            targets,
            spec.deck,
            spec.decks,
            spec.seed,
            credentials=c.channel,
            api_token=c.api_token,
            insecure=c.insecure,
            timeout=args.timeout,
            progress=shown.update,
        )


def _info(
    args: argparse.Namespace,
    spec: RunSpec,
    samples: Mapping[str, Sample],
    started: datetime,
    load_before: str,
    targets: list[str],
    dealer: DealerSample | None,
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "decks": spec.decks,
        "deck": spec.deck,
        "decks per 3/4/5-card test": spec.small_decks,
        "seed": spec.seed,
        "alpha": args.alpha,
        "correction": "Holm-Bonferroni over every test of every source",
        "seeded_32bit seed bits": spec.seed_bits,
        "workers": args.workers,
        "fairdeck": _version(),
        "algorithm": CURRENT_VERSION,
        "started (UTC)": started.isoformat(timespec="seconds"),
        "machine": f"{platform.platform()}; {os.cpu_count()} CPUs; "
        f"{platform.processor() or platform.machine()}",
        "python / numpy": f"{platform.python_version()} / {np.__version__}",
        "load average before / after": f"{load_before} / {_load()}",
    }
    if dealer is not None:
        info["dealer"] = ", ".join(targets)
        info["dealer hands verified / failed"] = f"{dealer.verified:,} / {dealer.failed:,}"
        info["seconds: dealer sampling"] = round(dealer.seconds, 2)
    for source, s in samples.items():
        info[f"cpu seconds: {source}"] = round(s.cpu_seconds, 2)
    return info
