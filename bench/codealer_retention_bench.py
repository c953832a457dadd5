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
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import _new_hand_id
from fairdeck_server.dealing.vault import SeedVault

DAY_MS = 86_400_000


class Link:
    """The co-dealer in this process (the gRPC link minus the transport)."""

    def __init__(self, codealer: CoDealer) -> None:
        self.codealer = codealer

    async def announce(
        self, hand_id: str, deck: str, holder: int, holders: int
    ) -> tuple[bytes, bytes, bytes]:
        record, signature = self.codealer.announce(hand_id, deck, holder, holders)
        return record, signature, self.codealer.identity_key

    async def shuffle(
        self, hand_id: str, keys: Sequence[bytes], shuffles: Sequence[bytes]
    ) -> tuple[bytes, bytes]:
        return self.codealer.shuffle(hand_id, keys, shuffles)

    async def share(
        self, hand_id: str, position: int, seat_key: bytes, count: int, seats: Sequence[bytes] = ()
    ) -> tuple[list[bytes], list[bytes]]:
        given = self.codealer.share(hand_id, position, seat_key, [], count, seats)
        return list(given.shares), list(given.sealed)

    async def reveal(self, hand_id: str) -> bytes:
        return self.codealer.reveal(hand_id)

    async def identity(self) -> bytes:
        return self.codealer.identity_key

    async def close(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=int, default=2, help="days kept after a hand ended; 0: never prune")
    parser.add_argument("--per-day", type=int, default=40)
    parser.add_argument("--days", type=int, default=6)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    now = [1_700_000_000_000]
    ledger = Ledger(tmp / "codealer.db")
    codealer = CoDealer(
        ledger, Ed25519PrivateKey.generate(), SeedVault(os.urandom(32)), clock_ms=lambda: now[0]
    )
    dealer = CodealDealer(
        Link(codealer),
        codealer.identity_key,
        CodealStore(tmp / "codeal.db"),
        SeedVault(os.urandom(32)),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: now[0],
    )

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
