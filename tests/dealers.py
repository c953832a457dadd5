"""A real dealer for tests: DealerServer on 127.0.0.1:0 with a real data dir,
in its own event-loop thread, with any ServerConfig; restartable."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from fairdeck_server.app import DealerServer
from fairdeck_server.config import ServerConfig


class RunningDealer:
    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.data_dir = data_dir
        self.config = {"grace_seconds": 5, **config}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: DealerServer | None = None
        self.target = ""

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def start(self) -> str:
        self.server = DealerServer(ServerConfig(listen="127.0.0.1:0", data_dir=self.data_dir, **self.config))
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


def deal_closed_hand(target: str, deck: str, draws: int = 5) -> str:
    """A hand dealt as the README says (two players' seeds by commit-then-reveal), drawn from and
    closed; its id."""
    from fairdeck.client import DealerClient, PlayerSeed, SeedRound

    with DealerClient(target) as client:
        hand = client.open_hand(deck)
        table = SeedRound(hand.hand_id, hand.commitment, seats=2)
        players = [PlayerSeed.create(hand.hand_id, seat, hand.commitment) for seat in range(2)]
        for p in players:
            table.commit(p.seat, p.commitment)
        for p in players:
            table.reveal(p.seat, p.reveal(table.commitments))
        client.shuffle(hand.hand_id, table.seeds)
        client.draw(hand.hand_id, draws)
        client.close_hand(hand.hand_id)
        return hand.hand_id
