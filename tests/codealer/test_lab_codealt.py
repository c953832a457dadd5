"""A lab collecting from a dealer that also deals co-dealt hands: the dealer's log holds their
entries (docs/codealing-spec.md section 11), and the collection's check of that log must read them
as the audit does, not take the honest dealer's co-dealt entries for a finding."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fairdeck.cli import main
from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, seat_releases
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker


def test_a_lab_collects_from_a_dealer_whose_log_holds_codealt_hands(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """The bug: ``lab collect --target`` checked the dealer's log with an auditor given no co-dealt
    checks, so every co-dealt entry became a finding against an honest dealer."""
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        dealer = DealerProcess(
            tmp_path / "data",
            tmp_path / "dealer.log",
            "--rate-limit",
            "0",
            *codealer.dealer_flags(),
            forker=serve_forker,
        )
        try:
            with DealerClient(dealer.target, timeout=30) as client:
                hands = CodealHands(client)
                hand = hands.open_hand("short")
                seat = SeatKey.generate()
                got = hands.draw(hand.hand_id, 2, seat_public_key=seat.public_key)
                hands.close_hand(hand.hand_id, seat_releases=seat_releases(hand, got.sealed_cards, seat))
            key = subprocess.run(
                [sys.executable, "-m", "fairdeck.cli", "key", "--data", str(tmp_path / "data")],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            out = tmp_path / "kit"
            argv = [
                "lab", "collect", "--out", str(out), "--target", dealer.target, "--key", key,
                "--raw-bytes", "200000", "--batch", "2000", "--no-progress",
            ]  # fmt: skip
            assert main(argv) == 0
        finally:
            dealer.terminate()
