"""What a co-dealt void costs beside a CloseHand of the same hands (codeal_voids.py).

Runs the real dealer (``CodealDealer``), co-dealer (``CoDealer``, in process) and SQLite files on an
injected clock: N hands of 3 tenants opened and dealt 5 public cards, the first half closed by
CloseHand one by one, the rest voided by one reaper pass; ms per hand of each, side by side.

    PYTHONPATH=. .venv/bin/python bench/codeal_voids_bench.py --hands 20 --deck standard
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_log import CodealLog
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.codeal_voids import CodealReaper
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.codeal_pool import InProcessLink


async def run(hands: int, deck: str, tmp: Path) -> str:
    now = [1_700_000_000_000]
    co = CoDealer(
        Ledger(tmp / "codealer.db"),
        Ed25519PrivateKey.from_private_bytes(bytes(32)),
        SeedVault(bytes(range(32))),
        clock_ms=lambda: now[0],
    )
    storage = SqliteStorage(tmp / "fairdeck.db")
    await storage.start()
    vault = SeedVault(bytes(range(1, 33)))
    dealer = CodealDealer(
        InProcessLink(co),
        co.identity_key,
        CodealStore(tmp / "codeal.db"),
        vault,
        log=CodealLog(Dealer(storage, vault)),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: now[0],
    )
    opened = []
    for i in range(hands):
        tenant = f"t{i % 3}"
        hand = await dealer.open_hand(tenant, deck)
        await dealer.draw(tenant, hand.hand_id, 5, b"")
        opened.append((tenant, hand.hand_id))
    half = hands // 2
    t0 = time.perf_counter()
    for tenant, hand_id in opened[:half]:
        await dealer.close(tenant, hand_id)
    t1 = time.perf_counter()
    reaper = CodealReaper(dealer, 3600, lambda: now[0])
    now[0] += 3_600_000
    await reaper.round()
    t2 = time.perf_counter()
    await dealer.aclose()
    await storage.close()
    return (
        f"{deck}: CloseHand {1000 * (t1 - t0) / half:.1f} ms/hand, "
        f"reaper void {1000 * (t2 - t1) / (hands - half):.1f} ms/hand ({reaper.voided} voided)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hands", type=int, default=20)
    parser.add_argument("--deck", default="standard")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(asyncio.run(run(args.hands, args.deck, Path(tmp))))


if __name__ == "__main__":
    main()
