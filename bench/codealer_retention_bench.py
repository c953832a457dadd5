"""The co-dealer's ledger over simulated days, with and without ``--keep-closed-days``.

Runs the real dealer (``CodealDealer``) and co-dealer (``CoDealer``) code in process over real
SQLite files, on an injected clock: each day ``--per-day`` standard hands are opened, dealt 9
cards and closed; then the day passes and the ledger is pruned as ``serve --keep-closed-days``
does (``--keep 0``: never). Prints, per day, the hands and shares kept, the ledger file's size
after a WAL checkpoint, and how long the prune took.

    .venv/bin/python bench/codealer_retention_bench.py --keep 2 --per-day 40 --days 6
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.codeal_pool import in_process

DAY_MS = 86_400_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=int, default=2, help="days kept after a hand ended; 0: never prune")
    parser.add_argument("--per-day", type=int, default=40)
    parser.add_argument("--days", type=int, default=6)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    now = [1_700_000_000_000]
    codealer, dealer, storage = in_process(tmp, now)
    asyncio.run(storage.start())
    ledger = codealer.ledger

    async def day() -> None:
        for _ in range(args.per_day):
            hand = await dealer.make_hand("t", "standard")
            await dealer.draw("t", hand.hand_id, 9, b"")
            await dealer.close("t", hand.hand_id)

    for d in range(args.days):
        asyncio.run(day())
        now[0] += DAY_MS
        started = time.perf_counter()
        pruned = ledger.prune(now[0] - args.keep * DAY_MS) if args.keep else 0
        took = time.perf_counter() - started
        ledger.transaction(lambda db: None)
        with ledger._lock:  # a checkpoint outside a transaction, so the file's size is the ledger's
            ledger._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        hands, shares = ledger.counts()
        size = os.path.getsize(tmp / "codealer.db") / 1024
        print(
            f"day {d}: hands {hands} shares {shares} file {size:.0f} KiB",
            f"pruned {pruned} in {took * 1000:.1f} ms",
        )


if __name__ == "__main__":
    main()
