"""A real dealer on 127.0.0.1:0 with a real SQLite file, run in a background
thread with its own event loop, and the real SDK pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient
from tests.support.dealers import RunningDealer


@pytest.fixture
def running(dealer_factory: Callable[..., RunningDealer]) -> RunningDealer:
    return dealer_factory()


@pytest.fixture
def client(running: RunningDealer) -> Iterator[DealerClient]:
    with DealerClient(running.target, timeout=20) as c:
        yield c


AsyncScenario = Callable[[AsyncDealerClient], Awaitable[Any]]


@pytest.fixture
def run_async(running: RunningDealer) -> Callable[[AsyncScenario], Any]:
    """Run ``async def scenario(client)`` to completion with an AsyncDealerClient
    made inside its own event loop (pytest-asyncio is not used). Reads
    ``running.target`` at call time, so it follows a restart."""

    def run(scenario: AsyncScenario) -> Any:
        async def main() -> Any:
            async with AsyncDealerClient(running.target, timeout=20) as c:
                return await scenario(c)

        return asyncio.run(main())

    return run
