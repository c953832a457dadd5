"""A wave of stale hands: thousands of hands abandoned at once reach their lifetime together.

Every one is voided in time, in batches; the dealer's own calls that log entries go on meanwhile
within a short deadline (they wait only for the hands they would otherwise make overdue, not for
the whole wave); health says SERVING once the wave is over; the fixture's audit finds no overdue
hand and nothing acknowledged lost.
"""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from tests.support.faults import FaultRun, metric, wait_for

pytestmark = pytest.mark.serial  # holds time or CPU to a bar: runs alone in a parallel run

ABANDONED = 3000
DEADLINE = 1.5


def test_a_wave_of_stale_hands_is_voided_while_entries_go_on(run: FaultRun) -> None:
    dealer = run.start("--metrics-listen", "127.0.0.1:0", lifetime=4)
    with DealerClient(dealer.target) as c:
        assert sum(1 for _ in c.deal_hands("standard", ABANDONED, close=False)) == ABANDONED
    began = time.monotonic()
    with DealerClient(dealer.target, timeout=DEADLINE, retries=0) as c:
        while metric(dealer, "fairdeck_hands_closed_total", outcome="voided") < ABANDONED:
            assert time.monotonic() - began < 60, "the wave was not voided within a minute"
            try:
                hand = c.open_hand("short")
                run.ledger.opened[hand.hand_id] = (hand.commitment, hand.commit_receipt.index)
                closed = c.close_hand(hand.hand_id)
                assert closed.reveal_receipt is not None
                run.ledger.closed[hand.hand_id] = closed.reveal_receipt.index
            except FairdeckError as e:
                raise AssertionError(f"a call failed during the void wave: {type(e).__name__}") from e
    assert metric(dealer, "fairdeck_reaper_behind") == 0
    with grpc.insecure_channel(dealer.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        wait_for(
            "health SERVING after the wave",
            lambda: (
                health.Check(health_pb2.HealthCheckRequest(), timeout=5).status
                == health_pb2.HealthCheckResponse.SERVING
            ),
        )
