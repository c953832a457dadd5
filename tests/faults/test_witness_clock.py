"""A witness whose clock is an hour off (a fault the issue does not name as a scenario): the dealer
compares each cosignature's timestamp with its own clock, says so once, and shows the skew as a
metric; dealing and the audit go on as before."""

from __future__ import annotations

import re

from tests.support.faults import FakeClock, FaultRun, fairdeck, lines, metric, wait_for
from tests.support.witnesses import WitnessProcess, init_witness


def test_a_witness_an_hour_off_is_said_once(run: FaultRun) -> None:
    made = fairdeck("init", "--data", str(run.data_dir))
    assert made.rc == 0, made.err
    witness_clock = FakeClock(run.tmp / "witness-faketime")
    witness_clock.set(+3600)
    wkey = init_witness(run.tmp / "w1", "witness.example/w1", run.key())
    witness = WitnessProcess(run.tmp / "w1", env=witness_clock.env())
    try:
        dealer = run.start("--witness", f"{witness.url}={wkey}", "--metrics-listen", "127.0.0.1:0")
        run.ledger.deal(dealer.target, 2)
        said = wait_for(
            "the skew to be said", lambda: lines(dealer, "witness witness.example/w1 cosigned at a time")
        )
        assert len(said) == 1 and re.search(r"at a time \+3(599|600|601) s from the dealer.s clock", said[0])
        skew = metric(dealer, "fairdeck_witness_clock_skew_seconds", witness="witness.example/w1")
        assert 3590 < skew < 3610
        run.ledger.deal(dealer.target, 3)
        wait_for(
            "more cosignatures",
            lambda: metric(dealer, "fairdeck_witness_cosigned_size", witness="witness.example/w1") >= 10,
        )
        assert len(lines(dealer, "cosigned at a time")) == 1  # once, not per cosignature
    finally:
        run.stop()
        witness.stop()
