"""``fairdeck stats`` end to end: the report, the verdicts, determinism, a live dealer.

The main run deals 20,000 decks per source. At that size every control of
fairdeck.stats.controls is caught except ``seeded_32bit``: its defect is that only
2**32 decks are reachable, which shows as repeated decks only from about
200,000 decks on (C(N, 2) / 2**32 expected repeats: 0.05 at 20,000, 4.7 at
200,000, 116 at 1,000,000; bench/stats_bench.py shows it caught at 1M). So
the test gives it 24 random seed bits (``--seed-bits 24``, the same function
fed seeds with fewer random bits), which expects C(20000, 2) / 2**24 = 11.9
repeats, and checks the duplicate test is what catches it.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("scipy")
pytest.importorskip("matplotlib")

from fairdeck.cli import main
from fairdeck.client import DealerClient
from fairdeck.client.models import DealtHand
from fairdeck.stats import sampling
from fairdeck.stats.analysis import analyse
from fairdeck.stats.remote import check_hand
from fairdeck.stats.sampling import RunSpec, sample
from tests.support.dealers import RunningDealer

pytestmark = pytest.mark.xdist_group("stats_command")
"""One worker runs the module, so the full statistics run is made once a run."""


def stats(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["stats", "--json", "--no-progress", "--out", str(out), *args])
    return code, json.loads(capsys.readouterr().out)


def p_values(result: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(r["source"], r["test"]): r["log10_p"] for r in result["results"]}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("stats")
    buffer = io.StringIO()  # module scope: no capsys

    with contextlib.redirect_stdout(buffer):
        code = main(
            [
                "stats",
                "-n",
                "20000",
                "--seed-bits",
                "24",
                "--workers",
                "1",
                "--json",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
    return code, json.loads(buffer.getvalue()), out


def test_ours_passes_and_every_control_is_caught_by_the_test_made_for_it(full_run: Any) -> None:
    code, result, _ = full_run
    assert code == 0 and result["ok"] and result["ours_passes"]
    caught = result["caught"]
    assert set(caught) == {
        "naive_swap_any",
        "sattolo_off_by_one",
        "modulo_biased",
        "float_scaled_small",
        "seeded_32bit@24bits",
        "riffle_7",
    }
    assert {"position", "perm-3"} <= set(caught["naive_swap_any"])
    assert {"position", "perm-3"} <= set(caught["sattolo_off_by_one"])
    assert "position" in caught["modulo_biased"] and "position" in caught["float_scaled_small"]
    assert caught["seeded_32bit@24bits"] == ["duplicates"]  # invisible to every frequency test
    assert {"rising", "successions"} <= set(caught["riffle_7"])
    ours = [r for r in result["results"] if r["source"] == "ours"]
    assert [r["test"] for r in ours] == [
        "position",
        "pairs",
        "successions",
        "rising",
        "duplicates",
        "perm-3",
        "perm-4",
        "perm-5",
    ]
    assert all(not r["rejected"] and r["p_adjusted"] > 0.01 for r in ours)
    assert result["parameters"]["decks"] == 20000
    assert len(result["results"]) == 7 * 8


def test_report_is_self_contained_html_with_its_charts(full_run: Any) -> None:
    _, result, out = full_run
    document = (out / "report.html").read_text(encoding="utf-8")
    charts = ["verdicts", "position-heatmap", "permutations", "radar-3", "residuals", "sequences"]
    assert document.count("data:image/png;base64,") == len(charts)
    for name in charts:
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "Holm-Bonferroni" in document and "<td>duplicates</td>" in document
    assert 'src="http' not in document  # nothing fetched from elsewhere
    assert json.loads((out / "results.json").read_text()) == result


def test_same_seed_same_p_values_whatever_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks have a fixed size and their own seeds, so worker processes change nothing.
    Small chunks (set in the parent, which makes the jobs) give each source several."""
    monkeypatch.setitem(sampling.CHUNK, "ours", 700)
    monkeypatch.setitem(sampling.CHUNK, "ours-small", 900)
    monkeypatch.setitem(sampling.CHUNK, "control", 800)

    def run(seed: str, workers: int) -> dict[tuple[str, str], float]:
        spec = RunSpec("standard", 3000, 3000, seed, controls=("naive_swap_any", "riffle_7"))
        jobs = sampling.jobs_for(spec)
        assert sum(1 for j in jobs if j.source == "naive_swap_any" and not j.small) == 4  # 800 x 3 + 600
        samples = sample(spec, workers=workers)
        assert samples["naive_swap_any"].main is not None and samples["naive_swap_any"].main.decks == 3000
        return {(r.source, r.test): r.log10_p for r in analyse(samples, spec, 0.01).results}

    one = run("same", 1)
    assert run("same", 2) == one
    assert run("different", 1) != one


LIVE_ALPHA = "1e-25"
"""The live run's alpha, a false alarm under 1e-11 a run. At 2,500 decks the chi-squares' far tails
are approximate (pairs expect 0.94 decks a cell), so the true tails are bounded, not read off:
pairs <= 3.9e-12 (Chernoff on Poissonised cells over P(T = N)), successions <= 1e-15 and rising
<= 1e-18 (exact DP over the merged cells, rounded up), position about 1e-18 (Chernoff, cells taken
independent). At 1e-6 successions alone was up to 5.8e-6. No power lost: what 1e-6 caught at this N
scores far lower (position: a naive swap 1e-83, Sattolo 1e-171; rising: riffle-7 1e-507), and a
dealer dealing a naive swap still fails this test (checked by patching the shared shuffle)."""


def test_a_live_dealer_is_sampled_and_every_hand_verified(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dealer = RunningDealer(tmp_path / "data")
    dealer.start()
    try:
        # The dealer's seeds are fresh randomness, so ours' p-values differ each run: LIVE_ALPHA.
        code, result = stats(
            capsys,
            tmp_path / "out",
            "-n",
            "2500",
            "--target",
            dealer.target,
            "--controls",
            "none",
            "--alpha",
            LIVE_ALPHA,
            "--workers",
            "1",
        )
    finally:
        dealer.close()
    assert code == 0 and result["ok"], (result["problems"], result["results"])
    assert result["parameters"]["dealer hands verified / failed"] == "2,500 / 0"
    assert result["parameters"]["dealer"] == dealer.target
    position = next(r for r in result["results"] if r["source"] == "ours" and r["test"] == "position")
    assert "largest deviation" in position["note"]


def test_a_hand_that_does_not_open_its_commitment_is_named(tmp_path: Path) -> None:
    dealer = RunningDealer(tmp_path / "data")
    dealer.start()
    try:
        with DealerClient(dealer.target) as client:
            hands = list(client.deal_hands("standard", 3, client_seeds=["s"], close=True))
    finally:
        dealer.close()
    good = hands[0]
    assert check_hand(good, "standard", "s") is None
    swapped = DealtHand(**{**good.__dict__, "cards": good.cards[1::-1] + good.cards[2:]})
    assert "not the deck the seeds derive" in (check_hand(swapped, "standard", "s") or "")
    other_seed = DealtHand(**{**good.__dict__, "server_seed": hands[1].server_seed})
    assert "does not open the commitment" in (check_hand(other_seed, "standard", "s") or "")
    assert "not the deck" in (check_hand(good, "standard", "not the seed sent") or "")
    unrevealed = DealtHand(**{**good.__dict__, "server_seed": None})
    assert "no server seed" in (check_hand(unrevealed, "standard", "s") or "")


def test_a_control_that_escapes_makes_the_run_inconclusive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """At 3,000 decks the 32-bit seed expects 0.001 repeats: nothing can see it, and the run says so
    (inconclusive at this N, exit 3: not OK, and not the FAILED of ours rejected)."""
    code, result = stats(capsys, tmp_path, "-n", "3000", "--controls", "seeded_32bit", "--workers", "1")
    assert code == 3 and not result["ok"] and result["ours_passes"] and result["verdict"] == "inconclusive"
    assert result["caught"] == {"seeded_32bit": []}


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["stats", "-n", "0"])
    assert e.value.code == 2
    assert main(["stats", "-n", "10", "--controls", "no_such_control"]) == 2
    assert "--controls takes" in capsys.readouterr().err


def test_missing_extra_is_named_with_its_install_command() -> None:
    script = (
        "import sys\n"
        "sys.modules['numpy'] = None  # import numpy now raises ImportError\n"
        "from fairdeck.cli import main\n"
        "sys.exit(main(['stats', '-n', '10']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip install 'fairdeck[stats]'" in done.stderr and "numpy" in done.stderr
    assert "Traceback" not in done.stderr
