"""``fairdeck lab test``'s report: one self-contained HTML page and the same facts as JSON.

The page leads with the overall verdict and one line per battery, then, per battery, what each
source is, the correction, and every test's p-value and Holm-adjusted p (rejected cells marked).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairdeck.lab.battery import FAILED, INCONCLUSIVE, OK, Battery
from fairdeck.log import safefiles

VERDICT_TEXT = {
    OK: "OK: ours passes every test, and every bad generator is rejected",
    FAILED: "FAILED: a test rejected ours",
    INCONCLUSIVE: "INCONCLUSIVE: ours passes, but a bad generator escaped, so this battery is not shown "
    "able to see that defect at this volume, or a source of ours was too short for every test, or a test "
    "whose cells expect under 5 decks (too few to trust) would have rejected ours",
}
_COLOUR = {OK: "#1a7f37", FAILED: "#cf222e", INCONCLUSIVE: "#9a6700"}


def overall(batteries: Sequence[Battery]) -> str:
    """FAILED beats INCONCLUSIVE beats OK, as in ``fairdeck stats``."""
    verdicts = {b.verdict for b in batteries}
    return FAILED if FAILED in verdicts else INCONCLUSIVE if INCONCLUSIVE in verdicts else OK


def as_json(
    batteries: Sequence[Battery], info: Mapping[str, Any], sources: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "verdict": overall(batteries),
        "parameters": dict(info),
        "sources": dict(sources),
        "batteries": [b.as_dict() for b in batteries],
    }


def _p(value: float) -> str:
    if not math.isfinite(value) or value <= 0:
        return "0"
    return f"{value:.3g}" if value >= 1e-4 else f"{value:.1e}"


def _battery(b: Battery, sources: Mapping[str, str]) -> str:
    colour = _COLOUR[b.verdict]
    parts = [
        f'<h2 id="{html.escape(b.name)}">{html.escape(b.name)}: '
        f'<span style="color:{colour}">{b.verdict.upper()}</span></h2>',
        f"<p>{html.escape(VERDICT_TEXT[b.verdict])}. Correction: {html.escape(b.correction)}, "
        f"alpha = {b.alpha:g}; {len(b.results):,} tests; {b.seconds:,.1f} s.</p>",
        "<ul>",
    ]
    for source in (*b.ours, *b.controls):
        rejected = b.rejected_by(source)
        role = "ours" if source in b.ours else "bad generator"
        state = (
            f"rejected by {len(rejected)}: {', '.join(rejected[:6])}{' ...' if len(rejected) > 6 else ''}"
            if rejected
            else "no test could run on it (too short)"
            if source in b.untested()
            else "passes every test"
        )
        described = sources.get(source, "")
        parts.append(
            f"<li><b>{html.escape(source)}</b> ({role}; {html.escape(described)}): {html.escape(state)}</li>"
        )
    parts.append("</ul>")
    if b.notes:
        parts.append("<details><summary>notes</summary><ul>")
        parts += [f"<li>{html.escape(n)}</li>" for n in b.notes]
        parts.append("</ul></details>")
    parts.append(
        "<details><summary>every test</summary><table><tr><th>source</th><th>test</th><th>p</th>"
        "<th>Holm-adjusted p</th><th>note</th></tr>"
    )
    for r in b.results:
        mark = ' class="rejected"' if r.rejected else ""
        parts.append(
            f"<tr{mark}><td>{html.escape(r.source)}</td><td>{html.escape(r.test)}</td><td>{_p(r.p)}</td>"
            f"<td>{_p(r.p_adjusted)}</td><td>{html.escape(r.note)}</td></tr>"
        )
    parts.append("</table></details>")
    return "\n".join(parts)


def _ours(b: Battery) -> str:
    rejected = ", ".join(html.escape(s) for s in b.ours if b.rejected_by(s))
    untested = ", ".join(html.escape(s) for s in b.untested())
    small = "; ".join(
        f"{html.escape(s)}: {html.escape(', '.join(t))}" for s in b.ours if (t := b.too_small(s))
    )
    if rejected:
        return f"rejected: {rejected}"
    if small:
        return f"not rejected; too few decks to trust {small}"
    return f"untested: {untested}" if untested else "passes"


def render(batteries: Sequence[Battery], info: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    verdict = overall(batteries)
    rows = "".join(
        f'<tr><td><a href="#{html.escape(b.name)}">{html.escape(b.name)}</a></td>'
        f'<td style="color:{_COLOUR[b.verdict]}"><b>{b.verdict.upper()}</b></td>'
        f"<td>{_ours(b)}</td>"
        f"<td>{sum(1 for c in b.controls if b.rejected_by(c))} of {len(b.controls)} rejected</td></tr>"
        for b in batteries
    )
    params = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in info.items()
    )
    body = "\n".join(_battery(b, sources) for b in batteries)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fairdeck lab test: {verdict.upper()}</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ddd; padding: 2px 8px; text-align: left; }}
tr.rejected td {{ background: #ffebe9; }} details {{ margin: .5rem 0; }}
</style></head><body>
<h1>fairdeck lab test: <span style="color:{_COLOUR[verdict]}">{verdict.upper()}</span></h1>
<p>{html.escape(VERDICT_TEXT[verdict])}. Each battery ran on ours and, at the same volume, on known-bad
generators; each is corrected on its own (family-wise error rate alpha per battery).</p>
<table><tr><th>battery</th><th>verdict</th><th>ours</th><th>bad generators</th></tr>{rows}</table>
{body}
<h2>Run</h2><table>{params}</table>
</body></html>
"""


def write(
    root: Path, under: str, batteries: Sequence[Battery], info: Mapping[str, Any], sources: Mapping[str, str]
) -> Path:
    """Write ``root/under`` report.json and report.html, each under a temporary name then renamed
    (``root`` is trusted as typed; nothing below it is followed: it may be a collection's)."""
    data = json.dumps(as_json(batteries, info, sources), indent=2) + "\n"
    safefiles.write_replacing(root, f"{under}report.json", data.encode())
    safefiles.write_replacing(root, f"{under}report.html", render(batteries, info, sources).encode())
    return root / f"{under}report.html"
