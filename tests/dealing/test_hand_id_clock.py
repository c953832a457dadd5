"""A hand id's time prefix (11 hex digits of milliseconds) is the dealer's clock, the time its
entries carry, not the wall clock: under --allow-clock-behind-log the two differ (clock.py)."""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path

from fairdeck.log.logentry import decode
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage

AHEAD_MS = 2 * 3600 * 1000
"""The log's time, two hours ahead of this machine's wall clock (a log written by a clock that was
ahead, continued with --allow-clock-behind-log)."""


def test_hand_ids_take_their_time_from_the_dealers_clock_not_the_wall_clock(tmp_path: Path) -> None:
    """The ids' prefix came from time.time_ns() while the entries carried the log's time: a hand
    id said it was made two hours before its own commit entry."""

    async def run() -> list[tuple[str, int]]:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        try:
            dealer = Dealer(
                storage,
                SeedVault(secrets.token_bytes(32)),
                clock_ms=lambda: time.time_ns() // 1_000_000 + AHEAD_MS,
            )
            ids = [(await dealer.open_hand("t", "standard", "")).hand_id]
            ids.append((await dealer.deal_new_hand("t", "short", ["x"], ""))[0].hand_id)
            ids += [
                s.batch.hand_ids[0]
                async for chunk in await dealer.deal_hands("t", "standard", 3, [], True)
                for s in chunk
            ]
            entries = [decode(e) for e in await storage.log_entries(0, await storage.log_size())]
            first = {}
            for entry in entries:
                first.setdefault(entry.hand_id, entry.time_ms)
            return [(hand_id, first[hand_id]) for hand_id in ids]
        finally:
            await storage.close()

    for hand_id, entry_ms in asyncio.run(run()):
        prefix_ms = int(hand_id[:11], 16)
        assert abs(prefix_ms - entry_ms) < 60_000, (hand_id, prefix_ms, entry_ms)
