"""``fairdeck stats`` says what its run shows: passed, failed, or inconclusive at this N.

Each test is named after a bug it pins:

- a run where ours passed every test but one broken shuffle escaped at that N
  was headed "FAILED" with exit 1, like a run where ours was rejected;
- the radar chart scaled each panel on its own, so ours' noise filled its
  panel as the broken shuffle's bias filled the other;
- ``--target`` did not say that every sampled hand is added to the live log;
- a pairs test expecting 0.02 decks a cell (about 50 decks) rejected a fair source, FAILED,
  in about 2% of runs: its chi-square tail is far too optimistic there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("scipy")
pytest.importorskip("matplotlib")

import numpy as np
from matplotlib.figure import Figure

from fairdeck.cli import main
from fairdeck.cli.stats_run import verdict_line
from fairdeck.stats import report
from fairdeck.stats.analysis import Analysis, analyse
from fairdeck.stats.sampling import OURS, RunSpec, Sample, sample
from fairdeck.stats.tally import DeckTally, hash_keys

ESCAPES = ["-n", "3000", "--controls", "seeded_32bit", "--workers", "1", "--no-progress"]
"""At 3,000 decks a 32-bit seed expects C(3000, 2) / 2^32 = 0.001 repeated decks: nothing can see it."""


def test_uncaught_control_is_inconclusive_not_failed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["stats", *ESCAPES, "--json", "--out", str(tmp_path / "json")])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 3
    assert (result["verdict"], result["ok"], result["ours_passes"]) == ("inconclusive", False, True)
    assert result["caught"] == {"seeded_32bit": []} and result["problems"] == []

    code = main(["stats", *ESCAPES, "--out", str(tmp_path / "text")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 3
    assert "FAILED" not in "\n".join(lines)
    assert lines[-1].startswith(
        "INCONCLUSIVE at this N: ours passes every test, but seeded_32bit went uncaught"
    )
    assert any(
        line.startswith("seeded_32bit: NOT CAUGHT (only repeated decks show a 32-bit") for line in lines
    )
    page = (tmp_path / "text" / "report.html").read_text(encoding="utf-8")
    assert '<h1>fairdeck fairness report: <span class="warn">INCONCLUSIVE at this N</span></h1>' in page
    assert "FAILED" not in page


def _analysis(ours_failed: list[str], caught: dict[str, list[str]], problems: list[str]) -> Analysis:
    return Analysis([], 0.01, ours_failed, caught, problems)


def test_verdicts_and_their_exit_statuses_are_distinct() -> None:
    """Ours rejected, or a dealt hand unverified, is FAILED whatever the controls did."""
    from fairdeck.stats.analysis import EXIT_STATUS

    assert _analysis([], {"naive": ["position"]}, []).verdict == "ok"
    assert _analysis([], {"naive": ["position"], "seeded": []}, []).verdict == "inconclusive"
    assert _analysis(["pairs"], {"naive": ["position"]}, []).verdict == "failed"
    assert _analysis(["pairs"], {"seeded": []}, []).verdict == "failed"
    assert _analysis([], {"seeded": []}, ["1 of 10 dealt hands did not verify"]).verdict == "failed"
    assert EXIT_STATUS == {"ok": 0, "failed": 1, "inconclusive": 3}


def test_radar_panels_share_one_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = RunSpec("standard", 200, 30_000, "radar", controls=("naive_swap_any",), small_sizes=(3,))
    samples = sample(spec, workers=1)
    figures: list[Figure] = []
    monkeypatch.setattr(report, "_png", lambda fig: figures.append(fig) or b"png")

    assert report.radar(samples, analyse(samples, spec, 0.01)) == b"png"
    [fig] = figures
    limits = [ax.get_ylim() for ax in fig.axes if ax.name == "polar"]
    assert len(limits) == 2, "ours and the naive shuffle"
    assert limits[0] == limits[1]
    # The shared scale is the control's: its bias (about 15% for 3 cards) fits, ours' noise looks small.
    tally = samples["naive_swap_any"].small[3]
    worst = float(abs(tally.counts() / (tally.decks / 6) - 1).max())
    assert worst > 0.1 and limits[0][1] >= 1 + worst
    ours = samples[OURS].small[3]
    assert float(abs(ours.counts() / (ours.decks / 6) - 1).max()) < worst / 3


def test_target_help_says_it_writes_to_the_live_log(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["stats", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "each adds a commit and a reveal to the dealer's live transparency log, for good" in text
    assert "3 INCONCLUSIVE at this N" in text


def _ours_only(decks: np.ndarray) -> Analysis:
    """``fairdeck stats``' analysis of ours alone, from decks given as card ranks."""
    spec = RunSpec("standard", len(decks), 1, "small", controls=(), small_sizes=())
    tally = DeckTally.empty(52)
    tally.add(decks, hash_keys("small", 52))
    return analyse({OURS: Sample(OURS, main=tally)}, spec, 0.01)


def test_a_test_too_small_to_trust_is_inconclusive_never_failed() -> None:
    """50 decks sharing their first two cards: pairs scores p < 1e-100 with 0.02 decks a cell."""
    rng = np.random.default_rng(36)
    decks = np.argsort(rng.random((50, 52)), axis=1)
    for deck in decks:  # cards 7 then 3 on top, the rest still shuffled
        rest = deck[(deck != 7) & (deck != 3)]
        deck[:] = np.concatenate(([7, 3], rest))
    analysis = _ours_only(decks)
    pairs = next(r for r in analysis.results if r.test == "pairs")
    assert pairs.approximate and pairs.log10_p < -100 and not pairs.rejected
    assert analysis.ours_failed == [] and "pairs" in analysis.too_small(OURS)
    assert analysis.verdict == "inconclusive"
    line = verdict_line(analysis)
    assert line.startswith("INCONCLUSIVE at this N: ours passes every test, but ") and "pairs" in line
    assert "too few to trust" in line


def test_a_large_biased_sample_still_fails() -> None:
    """The same bias in 20,000 decks (7.5 a pairs cell, 385 a position cell): FAILED, as before."""
    rng = np.random.default_rng(36)
    decks = np.argsort(rng.random((20_000, 52)), axis=1)
    biased = decks[:300]  # 300 decks with 7 then 3 on top: 68 times the chance share
    for deck in biased:
        rest = deck[(deck != 7) & (deck != 3)]
        deck[:] = np.concatenate(([7, 3], rest))
    analysis = _ours_only(decks)
    assert not any(r.approximate for r in analysis.results)
    assert "pairs" in analysis.ours_failed and analysis.verdict == "failed"


def test_a_fair_run_whose_pairs_test_is_too_small_is_inconclusive_end_to_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """At 20 decks (0.008 a pairs cell) seed 2's pairs scores adjusted p = 0.004: it exited 1, FAILED."""
    argv = ["stats", "-n", "20", "--small-decks", "2000", "--controls", "none", "--seed", "2"]
    code = main([*argv, "--workers", "1", "--no-progress", "--out", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 3, lines
    assert "ours: not rejected; too few decks to trust pairs" in lines
    assert lines[-1].startswith("INCONCLUSIVE at this N: ours passes every test, but pairs would have")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "not rejected (too few decks)" in page and "FAILED" not in page
