"""docs/vectors/fairdeck-codeal-seat-releases-v1.json: a seat's release tokens of a whole draw
(docs/codealing-spec.md 9.3) through the SDK's own ``seat_releases`` on the contract's SealedCard
messages: each case's line, and the file is what its generator writes. @fairdeck/verifier's
``seatReleases`` is held to the same lines (tests/web/test_codeal_page_release.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client.codeal_seat import SeatKey, seat_releases
from fairdeck.codeal.errors import CodealError
from fairdeck.v1 import dealer_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent.parent
VECTORS = json.loads((ROOT / "docs" / "vectors" / "fairdeck-codeal-seat-releases-v1.json").read_text())


def sdk_line(case: dict[str, Any]) -> str:
    hand = pb.Hand(hand_id=case["hand_id"], deck=case["deck"])
    cards = [
        pb.SealedCard(position=c["position"], shares=[bytes.fromhex(s) for s in c["shares"]])
        for c in case["sealed_cards"]
    ]
    seat = SeatKey(bytes.fromhex(case.get("seat_secret", VECTORS["seat_secret"])))
    try:
        tokens = seat_releases(hand, cards, seat)
    except CodealError as e:
        return f"FAILED at step {e.step}: {e.detail}"
    return " ".join(["OK: releases", *(t.hex() for t in tokens)])


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_the_sdks_seat_releases_give_each_vectors_line(case: dict[str, Any]) -> None:
    assert sdk_line(case) == case["line"]


def test_the_vectors_hold_valid_and_invalid_cases() -> None:
    lines = [c["line"] for c in VECTORS["cases"]]
    assert sum(line.startswith("OK: releases ") for line in lines) >= 2
    assert sum(line.startswith("FAILED at step seal: ") for line in lines) >= 3


def test_the_seat_releases_file_is_what_the_generator_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "vectors" / "generate_codeal_seat_releases.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
