"""Pooled co-dealt opens and their closes, in process: what the dealer's checks cost.

An open now announces the pooled deck it takes again to its co-dealer (a dead deck is dropped),
and a close stores that it asked for the co-dealer's seed before it asks. Real co-dealer ledger,
real SQLite files, the in-process link (no transport: over gRPC the announce adds a round trip).
Run from the repository root: ``.venv/bin/python -m bench.codeal_pool_checks``; prints ms each.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from tests.support.codeal_pool import close, fill, make_dealer

N = 24
"""Pooled decks opened, then closed, per run."""


async def run(tmp: Path) -> tuple[float, float]:
    dealer = make_dealer(tmp)
    await fill(dealer, [("t", "short")], N)
    start = time.perf_counter()
    hands = [await dealer.open_hand("t", "short") for _ in range(N)]
    opened = (time.perf_counter() - start) / N * 1000
    start = time.perf_counter()
    for hand in hands:
        await dealer.close("t", hand.hand_id)
    closed = (time.perf_counter() - start) / N * 1000
    await close(dealer)
    return opened, closed


def main() -> None:
    for _ in range(3):
        with tempfile.TemporaryDirectory() as directory:
            opened, closed = asyncio.run(run(Path(directory)))
            print(f"pooled open {opened:.2f} ms, close {closed:.2f} ms")


if __name__ == "__main__":
    main()
