"""The certification kit end to end: a small collection from a live dealer on loopback, then the
reduced battery (a few dieharder tests, NIST SP 800-22 on 10^6 bits, the deck tests): ours
passes, and each bad generator is rejected by each battery.

The dealer runs in a process of its own (``fairdeck serve``, tests/support/dealers.py), so that it
and the collection each get a core.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairdeck.cli import main
from fairdeck.lab import formats
from tests.support.dealers import DealerProcess, RunningDealer
from tests.support.forked_serve import ServeForker

pytestmark = pytest.mark.xdist_group("lab_live")
"""One worker runs the module, so the live collection (over a minute) is made once a run."""

RAW_BYTES = 7_200_000
"""Enough for one psample of most quick dieharder tests (each reads about 4.2 MB, measured) on the
raw stream *and on the seed source*, about two thirds its size (45 seed bytes a hand against 68
raw): about 106,000 hands. At 4.4 MB the seed source ran no dieharder test at all."""

ALPHA = "1e-5"
"""Our streams come from a live dealer's CSPRNG, so whether ours passes is random: at the default
alpha of 0.01 per battery this test would fail about once in 30 runs with nothing wrong. At 1e-5
it fails about once in 30,000; the bad generators are seeded, so their rejections are fixed
(the closest, one_biased_bit by diehard_count_1s_str at p = 1e-8, is below alpha / m = 2e-7)."""


def log_key(data: Path) -> str:
    """``fairdeck key --data DIR`` through the CLI's ``main`` in this process (an interpreter's
    start and imports cost more CPU than the command)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["key", "--data", str(data)]) == 0
    return out.getvalue().strip()


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, serve_forker: ServeForker
) -> Iterator[tuple[DealerProcess, str]]:
    root = tmp_path_factory.mktemp("lab-live")
    dealer = DealerProcess(root / "data", root / "dealer.log", "--rate-limit", "0", forker=serve_forker)
    try:
        key = log_key(root / "data")
        yield dealer, key
    finally:
        dealer.terminate()


@pytest.fixture(scope="module")
def collected(live: tuple[DealerProcess, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    dealer, key = live
    out = tmp_path_factory.mktemp("lab-collection") / "kit"
    argv = [
        "lab", "collect", "--out", str(out), "--target", dealer.target, "--key", key,
        "--raw-bytes", str(RAW_BYTES), "--batch", "8000", "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    return out, key


@pytest.mark.slow
def test_collected_from_a_live_dealer_every_hand_in_its_signed_log(collected: tuple[Path, str]) -> None:
    out, key = collected
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dealer_key"] == key
    assert manifest["log_check"]["ok"] and manifest["log_check"]["entries_checked"] == 2 * manifest["hands"]
    assert manifest["command"][:3] == ["fairdeck", "lab", "collect"]
    sizes = {f["path"]: f["bytes"] for f in manifest["files"]}
    hands = manifest["hands"]
    assert sizes[formats.RAW] >= RAW_BYTES and sizes[formats.RAW] % 64 == 0
    assert sizes[formats.SEEDS] == 45 * hands and sizes[formats.DECKS] == 52 * hands
    assert sizes[formats.INDEX] == 29 * hands and sizes[formats.CHOICES] == 51 * hands
    first = json.loads((out / formats.TRANSCRIPTS).read_bytes().split(b"\n", 1)[0])
    assert set(first["log"]) == {"commit", "reveal"}
    # the NIST file is the raw stream's first bits, in ASCII
    head = (out / formats.RAW).read_bytes()[:4]
    assert (out / formats.RAW_NIST).read_bytes()[:32] == "".join(format(b, "08b") for b in head).encode()


@pytest.mark.slow
def test_reduced_battery_ours_passes_and_every_bad_generator_is_rejected(
    collected: tuple[Path, str], dieharder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = collected
    argv = [
        "lab", "test", str(out), "--dieharder", "quick", "--nist-bits", "1000000", "--nist-sequences", "1",
        "--seed-bits", "16", "--alpha", ALPHA, "--json", "--no-progress", "--workers", "1",
    ]  # fmt: skip
    status = main(argv)
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    by_name = {b["battery"]: b for b in report["batteries"]}
    assert set(by_name) == {"dieharder (quick)", "NIST SP 800-22", "final outcomes (fairdeck stats)"}
    for battery in report["batteries"]:
        assert all(not tests for tests in battery["ours"].values()), (battery["battery"], battery["ours"])
        assert all(battery["controls"].values()), (battery["battery"], battery["controls"])
        assert battery["verdict"] == "ok"
    assert set(by_name["NIST SP 800-22"]["controls"]) == {"lcg32", "mt_low_bits_modulo", "one_biased_bit"}
    rows = by_name["dieharder (quick)"]["dieharder"]
    for source, least in (("ours: raw stream", 7), ("ours: seed source", 5)):
        ran = [r for r in rows[source] if r["p"] is not None]
        assert len(ran) >= least, (source, ran)  # one psample of most quick tests
    assert report["verdict"] == "ok" and status == 0
    assert (out / "report" / "report.html").read_text().count("OK") >= 4


def test_a_hand_whose_log_entries_are_anothers_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small dealer of its own: the check reads a dealer's whole log, and this one is short."""
    from fairdeck.lab.live import LiveDealer, check_log
    from fairdeck.log.note import Verifier

    running = RunningDealer(tmp_path / "data", rate_limit=0)
    try:
        target = running.start()
        key = log_key(tmp_path / "data")
        out = tmp_path / "kit"
        argv = ["lab", "collect", "--out", str(out), "--target", target, "--key", key, "--raw-bytes", "2000"]
        assert main([*argv, "--batch", "20", "--no-progress"]) == 0
        lines = (out / formats.TRANSCRIPTS).read_bytes().splitlines(keepends=True)
        first, second = json.loads(lines[0]), json.loads(lines[1])
        first["log"], second["log"] = second["log"], first["log"]  # each hand now points at the other's
        lines[0] = (json.dumps(first) + "\n").encode()
        lines[1] = (json.dumps(second) + "\n").encode()
        (out / formats.TRANSCRIPTS).write_bytes(b"".join(lines))
        dealer = LiveDealer(target, Verifier.parse(key))
        try:
            found = check_log(dealer, out)
        finally:
            dealer.close()
    finally:
        running.close()
    assert not found["ok"]
    assert len(found["problems"]) == 4 and all("is not the" in p for p in found["problems"])
    assert found["entries_checked"] == 2 * len(lines) - 4
