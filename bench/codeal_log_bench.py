"""What logging co-dealt hands costs: the dealer's pooled open and close, and the audit of a hand.

In process, over a real in-process co-dealer (tests/codealer/test_pool.InProcessLink), real SQLite
files (the co-dealt store, the log's storage) with their fsyncs: ``--hands`` pooled opens of a
short deck (the pool filled first), each followed by a draw of 2 and a close; the medians of the
open and the close. Then the audit's co-dealt checks (fairdeck.codeal.log_audit) over one
hand's entries against ``verify_hand`` alone. With ``PYTHONPATH`` set to an older tree's client,
server and root, the same script measures a dealer that does not log (no audit part there).

    .venv/bin/python bench/codeal_log_bench.py --hands 20
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer, DeckPool
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.codeal_pool import InProcessLink


async def dealer_side(tmp: Path, hands: int) -> dict[str, float]:
    identity = Ed25519PrivateKey.from_private_bytes(bytes(32))
    codealer = CoDealer(Ledger(tmp / "codealer.db"), identity, SeedVault(bytes(range(32))))
    vault = SeedVault(bytes(range(1, 33)))
    storage = SqliteStorage(tmp / "fairdeck.db")
    await storage.start()
    extra: dict[str, Any] = {}
    if "log" in inspect.signature(CodealDealer.__init__).parameters:  # a dealer that logs them
        from fairdeck_server.dealing.codeal_log import CodealLog

        extra["log"] = CodealLog(Dealer(storage, vault))
    dealer = CodealDealer(
        InProcessLink(codealer),
        codealer.identity_key,
        CodealStore(tmp / "codeal.db"),
        vault,
        new_hand_id=_new_hand_id,
        clock_ms=lambda: time.time_ns() // 1_000_000,
        **extra,
    )
    dealer.pool = DeckPool(dealer, hands)
    for _ in range(hands):
        await dealer.make_hand("", "short", pool_tenant="t")
    opens, closes = [], []
    for _ in range(hands):
        began = time.perf_counter()
        row = await dealer.open_hand("t", "short")
        opens.append(time.perf_counter() - began)
        await dealer.draw("t", row.hand_id, 2, b"")
        began = time.perf_counter()
        await dealer.close("t", row.hand_id)
        closes.append(time.perf_counter() - began)
    await storage.close()
    return {
        "logged": bool(extra),
        "pooled_open_ms_p50": round(statistics.median(opens) * 1000, 1),
        "close_ms_p50": round(statistics.median(closes) * 1000, 1),
    }


def audit_side() -> dict[str, float]:
    try:
        from fairdeck.codeal.log_audit import CodealLogAudit
    except ImportError:  # a tree before the audit read co-dealt entries
        return {}
    from fairdeck.codeal.entries import SEEDS, SETUP, SHARES, SHUFFLE, CodealEntry
    from fairdeck.codeal.local import codeal_local
    from fairdeck.codeal.verify import verify_hand

    count = [0]

    def random(n: int) -> bytes:
        count[0] += 1
        return hashlib.shake_256(b"codeal log bench" + count[0].to_bytes(8, "big")).digest(n)

    hand = codeal_local("standard", "bench-1", 2, list(range(10)), random)
    entries = [CodealEntry(SETUP, 1, hand.hand_id, hand.deck, hand.keys).encode()]
    entries += [CodealEntry(SHUFFLE, 1, hand.hand_id, records=(s,)).encode() for s in hand.shuffles]
    for d in hand.dealt:
        entries.append(CodealEntry(SHARES, 1, hand.hand_id, records=d.shares, position=d.position).encode())
    entries.append(CodealEntry(SEEDS, 1, hand.hand_id, records=hand.seeds or ()).encode())
    audit_s = verify_s = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        verify_hand(hand)
        verify_s = min(verify_s, time.perf_counter() - began)
        audit = CodealLogAudit()
        began = time.perf_counter()
        for i, e in enumerate(entries):
            assert audit.add(i, e)[1] == []
        audit_s = min(audit_s, time.perf_counter() - began)
    return {"audit_hand_ms": round(audit_s * 1000, 1), "verify_hand_ms": round(verify_s * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(dealer_side(Path(tmp), args.hands))
    print(json.dumps({**result, **audit_side()}))


if __name__ == "__main__":
    main()
