"""A real dealer on 127.0.0.1:0 with a real SQLite file, run in a background
thread with its own event loop, and the real SDK pointed at it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient
from fairdeck_server.app import DealerServer, ServerConfig


class RunningDealer:
    """Starts and stops a DealerServer on its own loop thread; restartable."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: DealerServer | None = None
        self.target = ""

    def _run(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def start(self) -> str:
        self.server = DealerServer(
            ServerConfig(listen="127.0.0.1:0", data_dir=self.data_dir, grace_seconds=5)
        )
        port = self._run(self.server.start())
        self.target = f"127.0.0.1:{port}"
        return self.target

    def stop(self) -> None:
        if self.server is not None:
            self._run(self.server.stop())
            self.server = None

    def restart(self) -> str:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[RunningDealer]:
    dealer = RunningDealer(tmp_path / "data")
    dealer.start()
    yield dealer
    dealer.close()


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
