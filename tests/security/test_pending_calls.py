"""gRPC core's queue of calls not yet taken up by our handlers (edge/transport.py,
MAX_PENDING_CALLS): small enough that a client resetting its streams en masse (20,000 health
Watch streams cancelled at once) cannot make gRPC hold more than the Watch flood's memory bar for
a moment, large enough that one client address, at its connection cap and each connection at its
stream cap, loses no call unseen (CANCELLED with no reason, before any handler)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from fairdeck.client import AsyncDealerClient
from fairdeck.v1 import dealer_pb2, dealer_pb2_grpc
from fairdeck_server.edge.transport import MAX_PENDING_CALLS
from fairdeck_server.run.config import ServerConfig
from tests.support.dealers import RunningDealer
from tests.support.floods import channel

WATCH_BAR_MIB = 64
"""What 20,000 Health.Watch streams may cost, held or ending (bench/README.md, section 20)."""
PENDING_CALL_KIB = 13.6
"""What gRPC core holds per queued call, measured (bench/README.md, section 20: +135 MiB at
10,000 and +56 MiB at 4,096 while the dealer's Python heap stayed at 22 MiB under tracemalloc)."""


def test_a_mass_reset_of_watch_streams_cannot_fill_grpcs_queue_past_the_watch_bar() -> None:
    """The 20,000 streams of a flood, cancelled at once, spiked the dealer's RSS by 145 MiB: each
    reset call waits in gRPC's queue (overload protection is off, so it no longer counts against
    the connection's streams) until our accept loop takes it, and the queue held 10,000."""
    assert MAX_PENDING_CALLS * PENDING_CALL_KIB / 1024 <= WATCH_BAR_MIB
    defaults = ServerConfig()
    assert defaults.max_connections_per_peer * defaults.max_streams_per_connection <= MAX_PENDING_CALLS


@pytest.mark.serial  # a time bar in disguise: see the docstring
def test_one_address_at_its_connection_cap_bursting_every_stream_loses_no_call(tmp_path: Path) -> None:
    """63 connections (the per-address cap, less the one that opened the hand, which the dealer may
    not have seen close yet), each with 60 GetHand at once (50 on the wire, the per-connection cap,
    10 queued by the client): 3,780 calls, every one answered. Serial: gRPC core cancels a call
    left waiting for a handler past grpc.server_max_unrequested_time_in_server (30 s), so the
    burst must be taken up within that; beside four workers on a loaded machine it was not
    (CANCELLED, "CANCELLED")."""
    defaults = ServerConfig()
    connections, per = defaults.max_connections_per_peer - 1, defaults.max_streams_per_connection + 10

    async def burst(target: str) -> list[object]:
        async with AsyncDealerClient(target, timeout=120) as c:
            hand = (await c.open_hand()).hand_id
        channels = [channel(target) for _ in range(connections)]
        try:
            request = dealer_pb2.GetHandRequest(hand_id=hand)
            stubs = [dealer_pb2_grpc.DealerServiceStub(ch) for ch in channels]
            calls = [stub.GetHand(request, timeout=120) for stub in stubs for _ in range(per)]
            return await asyncio.gather(*calls, return_exceptions=True)
        finally:
            await asyncio.gather(*(ch.close(None) for ch in channels))

    with RunningDealer(tmp_path / "d", rate_limit=0) as running:
        results = asyncio.run(burst(running.target))
    failed = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(results) == connections * per
    assert not failed, {(r.code().name, r.details()) for r in failed}
