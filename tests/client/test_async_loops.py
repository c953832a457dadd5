"""An asyncio client made before any event loop runs (at import time, in a module's globals) works
under asyncio.run, and again under a second asyncio.run (regression: both failed with "attached to
a different loop", because the grpc.aio channel was made, and bound, in the constructor)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from fairdeck.client import AsyncAuditClient, AsyncDealerClient, DealerClient
from fairdeck.v1 import audit_pb2, audit_pb2_grpc
from tests.support.dealers import RunningDealer


@pytest.fixture(scope="module")
def target(unlimited_dealer: RunningDealer) -> str:
    return unlimited_dealer.target


def test_a_client_made_outside_any_loop_works_under_two_asyncio_runs(target: str) -> None:
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # no loop runs here: like a module's import time
    dealer = AsyncDealerClient(target)

    async def deal() -> str:
        hand = await dealer.open_hand("standard")
        await dealer.shuffle(hand.hand_id)
        draw = await dealer.draw(hand.hand_id, 2)
        return f"{hand.hand_id}:{len(draw.cards)}"

    first = asyncio.run(deal())
    second = asyncio.run(deal())
    assert first.endswith(":2") and second.endswith(":2") and first != second

    async def finish() -> None:
        await dealer.aclose()

    asyncio.run(finish())


def test_an_audit_client_too(target: str) -> None:
    with DealerClient(target) as dealer:
        dealer.open_hand("standard")

    async def public_key() -> str:
        async with grpc.aio.insecure_channel(target) as channel:
            r = await audit_pb2_grpc.AuditServiceStub(channel).GetPublicKey(audit_pb2.GetPublicKeyRequest())
        return str(r.verifier_key)

    audit = AsyncAuditClient(target, verifier=asyncio.run(public_key()))
    sizes = [asyncio.run(audit.checkpoint()).size for _ in range(2)]
    assert sizes[0] >= 1 and sizes[1] >= sizes[0]
