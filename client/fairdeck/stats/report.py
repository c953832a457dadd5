"""The report a person can read: one HTML file with its PNG charts inside.

The charts are the seed articles' experiments, drawn for fairdeck and for the controls at the
same sample size (docs/stats/README.md, "The report", lists them). matplotlib draws them with the
Agg backend through ``Figure`` objects (no pyplot state); they are embedded as base64 data URIs
so the file stands alone, and the same PNGs are also written next to it.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from scipy import stats

from fairdeck.stats import checks, exact
from fairdeck.stats.analysis import FAILED, INCONCLUSIVE, OK, Analysis
from fairdeck.stats.checks import Result
from fairdeck.stats.sampling import OURS, Sample
from fairdeck.stats.tally import permutation_labels

OURS_COLOR = "#1f77b4"
BAD_COLOR = "#d62728"
PERMUTATION_PANELS = (OURS, "naive_swap_any", "sattolo_off_by_one", "seeded_32bit")
"""Sources drawn in the permutation chart (every source is in the table and the verdict map)."""
CLIP = 4.0
"""Heatmap colour scale: standardised residuals from -4 to +4."""


def label(source: str) -> str:
    return "fairdeck (ours)" if source == OURS else source


def format_p(log10_p: float, p: float) -> str:
    """A p-value for people: 0.43, 3.1e-05, or 1e-2166 when it underflows a float."""
    if p >= 0.001:
        return f"{p:.3f}"
    if p > 0:
        return f"{p:.1e}"
    if math.isinf(log10_p):
        return "0"
    return f"1e{math.floor(log10_p):d}"


def adjusted_log10(result: Result, tests: int) -> float:
    """log10 of the adjusted p-value, finite even when it underflows."""
    if result.p_adjusted > 0:
        return math.log10(result.p_adjusted)
    return result.log10_p + math.log10(tests)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def contrast_control(samples: Mapping[str, Sample], analysis: Analysis) -> str | None:
    """The control shown next to ours: naive_swap_any (the classic) when it ran, else the worst."""
    mains = [s for s in samples if s != OURS and samples[s].main is not None]
    if not mains:
        return None
    if "naive_swap_any" in mains:
        return "naive_swap_any"
    scores = {r.source: r.log10_p for r in analysis.results if r.test == "position" and r.source in mains}
    return min(scores, key=lambda s: scores[s]) if scores else mains[0]


def position_heatmap(samples: Mapping[str, Sample], analysis: Analysis) -> bytes | None:
    ours = samples.get(OURS)
    if ours is None or ours.main is None:
        return None
    other = contrast_control(samples, analysis)
    shown = [OURS] + ([other] if other else [])
    fig = Figure(figsize=(6.2 * len(shown), 5.6))
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    image = None
    for ax, source in zip(axes, shown, strict=True):
        main = samples[source].main
        assert main is not None
        z = checks.standardised_residuals(main.position)
        worst, _, _ = checks.relative_deviation(main.position)
        p = next(r for r in analysis.results if r.source == source and r.test == "position")
        image = ax.imshow(z, cmap="RdBu_r", vmin=-CLIP, vmax=CLIP, interpolation="nearest", aspect="equal")
        ax.set_title(
            f"{label(source)}\nX² p = {format_p(p.log10_p, p.p)}, largest deviation {worst:.1%}", fontsize=11
        )
        ax.set_xlabel("position in the deck (0 = top)")
        ax.set_ylabel("card (canonical order)")
        if main.n == 52:
            ax.set_xticks(range(0, 52, 13))
            ax.set_yticks(range(0, 52, 13))
    assert image is not None
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="(count − N/n) / sd, clipped to ±4")
    fig.suptitle(f"Card by position, {ours.main.decks:,} decks each", fontsize=13)
    return _png(fig)


def _small_sources(samples: Mapping[str, Sample], n: int) -> list[str]:
    return [s for s in samples if n in samples[s].small]


def permutation_bars(
    samples: Mapping[str, Sample], analysis: Analysis, sizes: Sequence[int] = (3, 4)
) -> bytes | None:
    """Counts of every order against the ideal line, one row per deck size, one panel per source.

    Panels of a row share their scale, so ours and a control compare by eye;
    the scale stops at ±60% of the ideal and a bar beyond it is labelled with
    its ratio to the ideal (Sattolo's triple counts).
    """
    sizes = [n for n in sizes if _small_sources(samples, n)]
    if not sizes:
        return None
    present = _small_sources(samples, sizes[0])
    sources = [s for s in present if s.split("@")[0] in PERMUTATION_PANELS] or present[:4]
    rejected = {(r.source, r.test) for r in analysis.results if r.rejected}
    fig = Figure(figsize=(3.4 * len(sources), 3.0 * len(sizes)))
    fig.subplots_adjust(hspace=0.45, wspace=0.3)
    axes = fig.subplots(len(sizes), len(sources), squeeze=False)
    for row, n in enumerate(sizes):
        names = permutation_labels(n)
        ratios = {
            s: samples[s].small[n].counts() / (samples[s].small[n].decks / math.factorial(n)) for s in sources
        }
        spread = min(0.6, max(float(np.abs(r - 1).max()) for r in ratios.values()) * 1.15)
        for col, source in enumerate(sources):
            ax: Axes = axes[row][col]
            tally = samples[source].small[n]
            ideal = tally.decks / math.factorial(n)
            counts = tally.counts()
            if source == OURS:
                color = OURS_COLOR
            else:
                color = BAD_COLOR if (source, f"perm-{n}") in rejected else "#999999"
            low, high = ideal * (1 - spread), ideal * (1 + spread)
            ax.bar(range(len(counts)), np.clip(counts, low, high), color=color, width=0.8)
            for k, ratio in enumerate(ratios[source]):
                if ratio - 1 > spread:  # clipped: say how tall it is (empty bars show themselves)
                    ax.text(k, high, f"×{ratio:.1f}", ha="center", va="bottom", fontsize=6)
            ax.axhline(ideal, color="black", linestyle="--", linewidth=1)
            ax.set_ylim(low, high)
            ax.set_xticks(range(len(counts)))
            if n == 3 or col == 0:  # the orders are the same in every panel of a row
                ax.set_xticklabels(names, rotation=90, fontsize=8 if n == 3 else 6.5)
            else:
                ax.set_xticklabels([])
            ax.set_title(f"{label(source)}, {n} cards", fontsize=9)
            ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(
        "How often each order was dealt "
        "(dashed: the ideal N/n!; red: this test rejects it, grey: it does not)",
        fontsize=11,
    )
    return _png(fig)


def radar(samples: Mapping[str, Sample], analysis: Analysis, n: int = 3) -> bytes | None:
    sources = _small_sources(samples, n)
    if OURS not in sources:
        return None
    shown = [OURS] + [s for s in ("naive_swap_any",) if s in sources]
    names = permutation_labels(n)
    angles = np.linspace(0, 2 * math.pi, len(names), endpoint=False)
    ratios = {}
    for source in shown:
        tally = samples[source].small[n]
        ratios[source] = tally.counts() / (tally.decks / len(names))
    # One scale for every panel: scaled on its own, ours' ±0.3% of noise would fill its panel
    # as a 15% bias fills the control's, and the two would look alike.
    pad = max(max(float(np.abs(r - 1).max()) for r in ratios.values()), 0.002) * 1.5
    fig = Figure(figsize=(5.4 * len(shown), 5.0))
    for i, source in enumerate(shown):
        ax = fig.add_subplot(1, len(shown), i + 1, projection="polar")
        ratio = ratios[source]
        closed = np.append(angles, angles[0])
        ax.plot(closed, np.ones(len(closed)), "k--", linewidth=1, label="ideal")
        color = OURS_COLOR if source == OURS else BAD_COLOR
        ax.plot(closed, np.append(ratio, ratio[0]), color=color, linewidth=2, label=label(source))
        ax.set_xticks(angles)
        ax.set_xticklabels(names)
        ax.set_ylim(1 - pad, 1 + pad)
        ax.set_title(f"{label(source)}: count / ideal, {n} cards", fontsize=10)
        ax.legend(loc="lower right", fontsize=8, bbox_to_anchor=(1.15, -0.1))
    return _png(fig)


def residual_histograms(samples: Mapping[str, Sample], analysis: Analysis) -> bytes | None:
    ours = samples.get(OURS)
    if ours is None or ours.main is None:
        return None
    other = contrast_control(samples, analysis)
    shown = [OURS] + ([other] if other else [])
    fig = Figure(figsize=(6.0 * len(shown), 4.0))
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    grid = np.linspace(-5, 5, 400)
    for ax, source in zip(axes, shown, strict=True):
        main = samples[source].main
        assert main is not None
        z = checks.standardised_residuals(main.position).ravel()
        color = OURS_COLOR if source == OURS else BAD_COLOR
        inside = np.clip(z, -6, 6)
        ax.hist(inside, bins=np.linspace(-6, 6, 61), density=True, color=color, alpha=0.7, label="cells")
        ax.plot(grid, stats.norm.pdf(grid), "k-", linewidth=1.5, label="N(0, 1)")
        ax.set_xlim(-6, 6)
        beyond = int((np.abs(z) > 6).sum())
        extra = f"; {beyond} cells beyond ±6 (piled at the edges)" if beyond else ""
        ax.set_title(f"{label(source)}: sd {z.std():.3f}{extra}", fontsize=10)
        ax.set_xlabel("standardised residual of a card-by-position cell")
        ax.legend(fontsize=8)
    fig.suptitle("Residuals of the card-by-position counts against the normal curve", fontsize=12)
    return _png(fig)


def sequence_histograms(samples: Mapping[str, Sample]) -> bytes | None:
    mains = [s for s in samples if samples[s].main is not None]
    if not mains:
        return None
    n = samples[mains[0]].main.n  # type: ignore[union-attr]
    fig = Figure(figsize=(13, 4.4))
    left, right = fig.subplots(1, 2)
    rising = np.array(exact.rising_sequence_probabilities(n))
    successions = np.array(exact.succession_probabilities(n))
    lo, hi = _support(rising, 1e-7)
    values = np.arange(1, n + 1)
    left.plot(values[lo:hi], rising[lo:hi], "k-", linewidth=2.5, label="exact (Eulerian numbers)", zorder=5)
    top = min(n, 8)
    right.plot(range(top), successions[:top], "k-", linewidth=2.5, label="exact", zorder=5)
    for source in mains:
        main = samples[source].main
        assert main is not None
        style: dict[str, Any] = {"linewidth": 1.2, "marker": ".", "label": label(source)}
        if source == OURS:
            style.update(color=OURS_COLOR, linewidth=2, marker="o")
        left.plot(values, main.rising / main.decks, **style)
        right.plot(range(top), main.successions[:top] / main.decks, **style)
    low_r = min(lo, *(int(np.flatnonzero(samples[s].main.rising)[0]) for s in mains))  # type: ignore[union-attr]
    left.set_xlim(low_r + 0.5, hi + 0.5)
    left.set_xlabel("rising sequences in a deck")
    left.set_ylabel("fraction of decks")
    left.set_title("Rising sequences (few: not shuffled enough)")
    right.set_xlabel("cards directly followed by their original neighbour")
    right.set_title(f"Successions (exact mean {(n - 1) / n:.3f})")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    return _png(fig)


def _support(probabilities: npt.NDArray[np.float64], floor: float) -> tuple[int, int]:
    where = np.flatnonzero(probabilities > floor)
    return int(where[0]), int(where[-1]) + 1


def verdict_map(analysis: Analysis, sources: Sequence[str]) -> bytes | None:
    tests = list(dict.fromkeys(r.test for r in analysis.results))
    if not tests:
        return None
    m = len(analysis.results)
    grid = np.full((len(sources), len(tests)), np.nan)
    for r in analysis.results:
        grid[sources.index(r.source), tests.index(r.test)] = -adjusted_log10(r, m)
    fig = Figure(figsize=(1.25 * len(tests) + 3, 0.6 * len(sources) + 1.6))
    ax = fig.subplots()
    cap = 20.0
    ax.imshow(np.minimum(grid, cap), cmap="Reds", vmin=0, vmax=cap, aspect="auto")
    for i, source in enumerate(sources):
        for j, test in enumerate(tests):
            found = next((x for x in analysis.results if x.source == source and x.test == test), None)
            if found is None:
                continue
            r = found
            mark = "✗" if r.rejected else "✓"
            text = f"{mark} {format_p(r.log10_p, r.p)}\nadj. {format_p(adjusted_log10(r, m), r.p_adjusted)}"
            color = "white" if grid[i, j] > cap / 2 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
    ax.set_xticks(range(len(tests)))
    ax.set_xticklabels(tests)
    ax.set_yticks(range(len(sources)))
    ax.set_yticklabels([label(s) for s in sources])
    ax.set_title(
        f"p-values and Holm-adjusted p-values over all {m} tests (✗: rejected at α = {analysis.alpha:g})",
        fontsize=11,
    )
    return _png(fig)


def charts(samples: Mapping[str, Sample], analysis: Analysis) -> dict[str, bytes]:
    """Every chart, by file name stem; a chart with nothing to show is left out."""
    drawn = {
        "verdicts": verdict_map(analysis, list(samples)),
        "position-heatmap": position_heatmap(samples, analysis),
        "permutations": permutation_bars(samples, analysis),
        "radar-3": radar(samples, analysis),
        "residuals": residual_histograms(samples, analysis),
        "sequences": sequence_histograms(samples),
    }
    return {name: png for name, png in drawn.items() if png is not None}


# --- HTML -----------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } .ok { color: #1a7f37; } .bad { color: #c62828; } .warn { color: #b26a00; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.rej td { background: #fdecea; } img { max-width: 100%; } .note { color: #555; font-size: 0.85em; }
"""

CAPTIONS = {
    "verdicts": (
        "Every test of every source: its p-value, and below it the Holm-Bonferroni adjusted p-value over the "
        "whole table; the colour is the adjusted one."
    ),
    "position-heatmap": (
        "How often each card landed in each position, as standardised residuals. A fair shuffle gives "
        "noise (about 1 cell in 16,000 beyond ±4); a biased one gives structure."
    ),
    "permutations": "The Spanish post's experiment: every order of a 3- and a 4-card deck, counted.",
    "radar-3": (
        "The same 3-card counts as a radar, as a ratio to the ideal count, on one scale for both panels: "
        "ours' noise hugs the dashed ideal circle; the broken shuffle's bias shows as a lopsided shape."
    ),
    "residuals": "The heatmap's cells as a histogram: a fair shuffle's residuals follow the normal curve.",
    "sequences": (
        "Rising sequences and successions per deck, against their exact distributions. These catch a deck "
        "that was not shuffled enough (the riffle_7 control), which frequency tables cannot."
    ),
}


def _image(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    caption = html.escape(CAPTIONS.get(name, ""))
    return (
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
        f'<figcaption class="note">{caption}</figcaption></figure>'
    )


def _table(
    rows: Sequence[Sequence[str]],
    header: Sequence[str],
    classes: Sequence[str] = (),
    numeric: Sequence[int] = (),
) -> str:
    """An HTML table of already-escaped cells; columns listed in ``numeric`` are right-aligned."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        cells = "".join(
            f'<td class="num">{c}</td>' if k in numeric else f"<td>{c}</td>" for k, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def render(
    analysis: Analysis,
    pictures: Mapping[str, bytes],
    info: Mapping[str, Any],
    descriptions: Mapping[str, str],
    hints: Mapping[str, str] | None = None,
) -> str:
    """The whole report as one HTML document."""
    m = len(analysis.results)
    verdict, verdict_class = {
        OK: ("OK", "ok"),
        FAILED: ("FAILED", "bad"),
        INCONCLUSIVE: ("INCONCLUSIVE at this N", "warn"),
    }[analysis.verdict]
    escaped = "warn" if analysis.verdict == INCONCLUSIVE else "bad"  # ours passed: a larger N decides
    lines = []
    small = analysis.too_small(OURS)
    if analysis.ours_passes and small:
        lines.append(
            f"<li class='warn'>fairdeck (ours) is not rejected, but {html.escape(', '.join(small))} "
            f"would have rejected it with under {checks.MIN_EXPECTED:g} decks expected per cell: too few "
            "to trust either way, so this N cannot decide; deal more decks.</li>"
        )
    elif analysis.ours_passes:
        lines.append(
            f"<li class='ok'>fairdeck (ours) passes all {sum(r.source == OURS for r in analysis.results)} "
            "tests.</li>"
        )
    else:
        failed = ", ".join(analysis.ours_failed)
        lines.append(f"<li class='bad'>fairdeck (ours) is rejected by: {html.escape(failed)}.</li>")
    for control, tests in analysis.caught.items():
        if tests:
            lines.append(
                f"<li class='ok'>{html.escape(control)} is caught by: {html.escape(', '.join(tests))}.</li>"
            )
        else:
            hint = (hints or {}).get(control, "")
            why = f" ({html.escape(hint)})" if hint else ""
            lines.append(
                f"<li class='{escaped}'>{html.escape(control)} is not caught by any test at this N{why}.</li>"
            )
    for problem in analysis.problems:
        lines.append(f"<li class='bad'>{html.escape(problem)}</li>")
    rows, classes = [], []
    for r in analysis.results:
        rows.append(
            [
                html.escape(label(r.source)),
                html.escape(r.test),
                f"{r.statistic:,.2f}" if math.isfinite(r.statistic) else "∞",
                f"{r.dof:,.0f}" if r.dof is not None else "—",
                format_p(r.log10_p, r.p),
                format_p(adjusted_log10(r, m), r.p_adjusted),
                "rejected"
                if r.rejected
                else "not rejected (too few decks)"
                if r.approximate
                else "not rejected",
                html.escape(r.note),
            ]
        )
        classes.append("rej" if r.rejected else "")
    table = _table(
        rows, ["source", "test", "statistic", "dof", "p", "adjusted p", "verdict", "detail"], classes
    )
    params = _table([[html.escape(k), html.escape(str(v))] for k, v in info.items()], ["parameter", "value"])
    sources = _table(
        [[html.escape(label(k)), html.escape(v)] for k, v in descriptions.items()], ["source", "what it is"]
    )
    figures = "".join(_image(name, png) for name, png in pictures.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fairdeck stats: {verdict}</title>
<style>{_CSS}</style></head>
<body>
<h1>fairdeck fairness report: <span class="{verdict_class}">{verdict}</span></h1>
<p>{int(info.get("decks", 0)):,} decks of <b>{html.escape(str(info.get("deck", "")))}</b> from fairdeck and
from each known-broken shuffle, run through the same tests. The rule: ours must pass every test and every
broken shuffle must be caught by at least one. When ours passes but a broken shuffle escapes, the run is
inconclusive at this N (the tests were not shown able to see that defect at this many decks), not failed.
A test is <i>rejected</i> when its Holm-Bonferroni adjusted
p-value, over all {m} tests in the table, is at most α = {analysis.alpha:g}, and its cells expect at
least {checks.MIN_EXPECTED:g} decks each: below that its p-value is shown but too rough to reject anything
(and if it would have rejected ours, the run is inconclusive at this N).</p>
<ul>{"".join(lines)}</ul>
<h2>Sources</h2>{sources}
<h2>Charts</h2>{figures}
<h2>Every test</h2>{table}
<p class="note">position: Pearson's X² of the card-by-position counts, scaled by (n−1)/n against
χ²((n−1)²) (each deck is a permutation matrix, so rows and columns are constrained). pairs: the first two
cards as an ordered pair, χ² over n(n−1) cells. successions: how many cards are directly followed by their
successor in the starting order; rising: the number of rising sequences; both against their exact
distributions, tails merged to 5 expected decks. duplicates: repeated decks (64-bit universal hash, its
collision rate included in the null) against a Poisson expectation; this is the only test that sees a
generator with a small seed. perm-n: every order of an n-card deck, χ² with n!−1 df. A p-value written
as a bare power of ten (1e-1875) is below what a float can hold; it is computed in log space.</p>
<h2>Run</h2>{params}
</body></html>
"""


def write(out: Path, pictures: Mapping[str, bytes], document: str) -> Path:
    """Write the report and its PNGs into ``out``; returns the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    for name, png in pictures.items():
        (out / f"{name}.png").write_bytes(png)
    path = out / "report.html"
    path.write_text(document, encoding="utf-8")
    return path
