"""``close()`` (asyncio: ``aclose()``) closes the client's channel, as httpx's clients do, and
``close_hand(hand_id)`` closes a hand (regression: ``close(hand_id)`` closed a hand and the channel
was closed by ``close_channel()``). The old names work one more release, with a DeprecationWarning,
against a real dealer."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from fairdeck.client import AsyncAuditClient, AsyncDealerClient, AuditClient, DealerClient, HandState
from tests.support.dealers import RunningDealer


@pytest.fixture(scope="module")
def served(unlimited_dealer: RunningDealer) -> tuple[str, str]:
    data = unlimited_dealer.data_dir
    target = unlimited_dealer.target
    key = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "key", "--data", str(data)],
        capture_output=True,
        text=True,
        check=True,
    )
    return target, key.stdout.strip()


def channel_is_closed(client: DealerClient | AuditClient) -> bool:
    """A blocking grpc channel refuses every call once closed."""
    try:
        client.get("x") if isinstance(client, DealerClient) else client.checkpoint()
    except ValueError as e:
        return "closed channel" in str(e)
    except Exception:
        return False
    return False


def test_close_hand_closes_a_hand_and_close_closes_the_channel(served: tuple[str, str]) -> None:
    target, _ = served
    client = DealerClient(target)
    opened = client.open_hand()
    closed = client.close_hand(opened.hand_id)
    assert closed.state is HandState.CLOSED
    closed.verify(commitment=opened.commitment)
    assert client.close() is None
    assert channel_is_closed(client)
    with DealerClient(target) as left:
        left.get(opened.hand_id)
    assert channel_is_closed(left)  # leaving the block closes it too


def test_the_old_names_warn_and_still_work(served: tuple[str, str]) -> None:
    target, vkey = served
    client = DealerClient(target)
    opened = client.open_hand()
    with pytest.deprecated_call(match=r"close_hand\(hand_id\)"):
        closed = client.close(opened.hand_id)
    assert closed.state is HandState.CLOSED and closed.hand_id == opened.hand_id
    with pytest.deprecated_call(match=r"use close\(\)"):
        client.close_channel()
    assert channel_is_closed(client)

    log = AuditClient(target, verifier=vkey)
    log.checkpoint()
    with pytest.deprecated_call(match=r"use close\(\)"):
        log.close_channel()
    assert channel_is_closed(log)


def test_the_asyncio_client_closes_with_aclose_and_keeps_the_old_names(served: tuple[str, str]) -> None:
    target, vkey = served

    async def run() -> None:
        client = AsyncDealerClient(target)
        opened = await client.open_hand()
        closed = await client.close_hand(opened.hand_id)
        assert closed.state is HandState.CLOSED
        other = await client.open_hand()
        with pytest.deprecated_call(match=r"close_hand\(hand_id\)"):
            old = await client.close(other.hand_id)
        assert old.state is HandState.CLOSED and old.hand_id == other.hand_id
        await client.aclose()
        assert client._aio is None  # the next call makes a new channel
        await client.get(other.hand_id)
        await client.close()  # awaitable close() closes the channel too, without a warning
        assert client._aio is None
        await client.get(other.hand_id)
        with pytest.deprecated_call(match=r"use aclose\(\)"):
            await client.close_channel()
        assert client._aio is None

        log = AsyncAuditClient(target, verifier=vkey)
        await log.checkpoint()
        await log.aclose()
        assert log._aio is None
        await log.checkpoint()
        with pytest.deprecated_call(match=r"use aclose\(\)"):
            await log.close_channel()
        assert log._aio is None

    asyncio.run(run())


def test_leaving_an_async_with_block_closes_the_channel(served: tuple[str, str]) -> None:
    target, _ = served

    async def run() -> AsyncDealerClient:
        async with AsyncDealerClient(target) as client:
            await client.open_hand()
            assert client._aio is not None
        return client

    assert asyncio.run(run())._aio is None
