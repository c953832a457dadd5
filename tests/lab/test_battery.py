"""The verdict rules and corrections of fairdeck.lab.battery, on made-up tables (no battery runs)."""

from __future__ import annotations

import hashlib
import math

from fairdeck.lab import battery, dieharder
from fairdeck.stats import checks


def _battery(ours_p: float, control_ps: dict[str, float]) -> battery.Battery:
    results = [battery._result("ours", "t", ours_p)]
    results += [battery._result(name, "t", p) for name, p in control_ps.items()]
    checks.holm(results, 0.01)
    return battery.Battery("b", ["ours"], list(control_ps), results, 0.01, "holm")


def test_verdicts_are_stats_own() -> None:
    assert _battery(0.5, {"bad": 1e-12}).verdict == battery.OK
    assert _battery(1e-9, {"bad": 1e-12}).verdict == battery.FAILED  # FAILED beats INCONCLUSIVE too
    assert _battery(1e-9, {"bad": 0.5}).verdict == battery.FAILED
    assert _battery(0.5, {"bad": 1e-12, "subtle": 0.2}).verdict == battery.INCONCLUSIVE


def test_holm_over_a_family_larger_than_the_tests_run() -> None:
    """A bad generator's dieharder run stops early; its untested tests still count in m."""
    results = [battery._result("ours", f"t{k}", p) for k, p in enumerate((0.001, 0.2, 0.9))]
    battery._holm_with_m(results, 0.01, 3)
    assert results[0].rejected and math.isclose(results[0].p_adjusted, 0.003)
    battery._holm_with_m(results, 0.01, 30)
    assert not results[0].rejected and math.isclose(results[0].p_adjusted, 0.03)


def test_dieharder_psamples_never_need_more_than_the_stream() -> None:
    per = {(t, n): b for t, n, b in dieharder.PSAMPLE_BYTES}
    for size in (5_000_000, 64 << 20, 1 << 30):
        for test, ntup, p in dieharder.plan(size, "full"):
            assert 1 <= p <= dieharder.PSAMPLES
            assert p == 1 or p * per[(test, ntup)] * 1.1 <= size
    assert {(t, n) for t, n, _ in dieharder.plan(1 << 30, "quick")} == set(dieharder.QUICK)


def test_nist_on_several_sequences_checks_uniformity_and_proportion() -> None:
    data = hashlib.shake_256(b"nist").digest(3 * 400_000 // 8)
    found, used = battery.nist_source("ours", data, 400_000, 3)
    tests = {r.test for r in found}
    assert used == 3
    assert {"frequency uniformity", "frequency proportion", "serial-2 uniformity"} <= tests
    assert all(0.0 <= r.p <= 1.0 for r in found)
    assert "Kolmogorov-Smirnov" in next(r.note for r in found if r.test == "frequency uniformity")


def test_dieharder_family_counts_every_p_value_a_test_prints(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """sts_serial prints 30 final p-values in one run, diehard_runs two, ...: the family m that
    Holm divides by is every p-value of the plan on every source, not the number of dieharder
    runs. When no source stops early there are more p-values than runs, and the table is still
    corrected (it used to fail with a math domain error)."""
    from pathlib import Path

    def everything(path: Path, which: str, **_: object) -> list[dieharder.Outcome]:
        rows = []
        for test, ntup, psamples in dieharder.plan(1 << 30, which):
            for _ in range(dieharder.ROWS.get(test, 1)):
                rows.append(dieharder.Outcome(test, ntup, f"t{test}", psamples, 0.5, "PASSED"))
        return rows

    monkeypatch.setattr(dieharder, "run_battery", everything)
    monkeypatch.setattr(Path, "stat", lambda self: type("S", (), {"st_size": 1 << 30})())
    ours = {"ours": Path("ours")}
    bad = {name: Path(name) for name in ("a", "b")}
    b = battery.run_dieharder(ours, bad, which="quick", alpha=0.01, workers=1)
    per_source = sum(dieharder.ROWS.get(t, 1) for t, _ in dieharder.QUICK)
    assert per_source == 10  # nine runs, diehard_runs prints two p-values
    assert len(b.results) == 3 * per_source
    assert f"m = {3 * per_source}" in b.correction
    assert all(math.isclose(r.p_adjusted, 1.0) for r in b.results)


def test_nist_sequences_are_n_bits_long_when_n_is_not_a_whole_number_of_bytes() -> None:
    from fairdeck.lab import nist

    n = nist.MIN_BITS + 3
    data = hashlib.shake_256(b"odd n").digest(n // 8 + 1)
    found, _ = battery.nist_source("ours", data, n, 1)
    frequency = next(r.p for r in found if r.test == "frequency")
    assert frequency == nist.frequency(nist.bits_from_bytes(data)[:n])["frequency"]


def test_a_source_of_ours_that_no_test_could_run_on_is_not_ok() -> None:
    """The seed source is about two thirds the size of the raw stream: a collection can hold one
    NIST sequence of the raw stream and none of the seeds. Ours then 'passes' only because the
    seeds were never tested, which must not read OK."""
    from fairdeck.lab import generators

    raw = hashlib.shake_256(b"raw").digest(130_000)
    seeds = hashlib.shake_256(b"seeds").digest(90_000)
    bad = {name: generators.generate(name, len(raw), "1") for name in generators.GENERATORS}
    b = battery.run_nist({"raw": raw, "seeds": seeds}, bad, n=1_000_000, sequences=1, alpha=0.01)
    assert not b.rejected_by("raw") and all(b.rejected_by(name) for name in bad)
    assert b.verdict == battery.INCONCLUSIVE
    assert any("seeds" in note and "not run" in note for note in b.notes)
    from fairdeck.lab import report

    page = report.render([b], {}, {})
    assert "untested: seeds" in page and "no test could run on it" in page


def test_a_test_too_small_to_trust_is_inconclusive_and_catches_nothing() -> None:
    """Bug: a 50-deck battery FAILED ours on a pairs test expecting 0.02 decks a cell."""
    sparse = [battery._result("ours", "pairs", 1e-10), battery._result("bad", "pairs", 1e-12)]
    for r in sparse:
        r.approximate = True
    results = [*sparse, battery._result("ours", "t", 0.5), battery._result("bad", "t", 0.3)]
    checks.holm(results, 0.01)
    b = battery.Battery("b", ["ours"], ["bad"], results, 0.01, "holm")
    assert b.rejected_by("ours") == [] and b.rejected_by("bad") == []
    assert b.too_small("ours") == ["pairs"] and b.as_dict()["too_small"] == {
        "ours": ["pairs"],
        "bad": ["pairs"],
    }
    assert b.verdict == battery.INCONCLUSIVE
    results[3] = battery._result("bad", "t", 1e-12)  # a trusted test catches the control: still not OK
    checks.holm(results, 0.01)
    assert battery.Battery("b", ["ours"], ["bad"], results, 0.01, "holm").verdict == battery.INCONCLUSIVE
