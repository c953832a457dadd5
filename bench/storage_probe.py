"""Diagnostic: where the dealer's batch path (DealHands) spends its time, without gRPC.

Runs ``Dealer.deal_hands`` in-process on a fresh SqliteStorage (same engine,
same pragmas as the server) and splits the time into:

* the event-loop side: building each hand (``Dealer._new_hand``: seed,
  commitment, derivation, sealing, log entries);
* the writer thread: each SQL statement kind (``INSERT INTO hands``,
  ``COMMIT``, the Merkle hash reads and writes, ...), timed by wrapping the
  connection the storage opens.

No gRPC, no protobuf, no load generator: the decks/s here is an upper bound
for what the server's DealHands can reach with the current storage path.
This probes internals (it patches ``sqlite3.connect`` inside the storage
module), so it may need adjusting when those change.

    .venv/bin/python bench/storage_probe.py [--hands 100000] [--close] [--fsync-probe]
    .venv/bin/python bench/storage_probe.py --unary 64 --hands 20000   # the DealNewHand path
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import secrets
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import fairdeck_server.storage.sqlite.schema as sqlite_schema
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage

STATS: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])


def _kind(sql: str) -> str:
    words = sql.split()
    if not words:
        return "?"
    head = " ".join(words[:3]) if words[0].upper() in ("INSERT", "SELECT", "UPDATE", "DELETE") else words[0]
    if words[0].upper() == "SELECT":
        head = "SELECT ... FROM " + (words[words.index("FROM") + 1] if "FROM" in words else "?")
    return head


class TimedConnection(sqlite3.Connection):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        t = time.perf_counter()
        try:
            return super().execute(sql, *args)
        finally:
            s = STATS[_kind(sql)]
            s[0] += 1
            s[1] += time.perf_counter() - t

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        t = time.perf_counter()
        try:
            return super().executemany(sql, *args)
        finally:
            s = STATS["many: " + _kind(sql)]
            s[0] += 1
            s[1] += time.perf_counter() - t


def _timed_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    return sqlite3.connect(*args, factory=TimedConnection, **kwargs)


async def probe(hands: int, close: bool, data: Path, pragmas: list[str], unary: int) -> None:
    sqlite_schema.sqlite3 = type("S", (), {**vars(sqlite3), "connect": staticmethod(_timed_connect)})  # type: ignore[assignment]
    storage = SqliteStorage(data / "fairdeck.db")
    connect = storage._writer.connect

    def connect_with_pragmas() -> sqlite3.Connection:
        conn = connect()
        for pragma in pragmas:  # what-if experiments, e.g. cache_size=-262144
            conn.execute(f"PRAGMA {pragma}")
        return conn

    storage._writer.connect = connect_with_pragmas  # type: ignore[method-assign]
    await storage.start()
    dealer = Dealer(storage, SeedVault(secrets.token_bytes(32)))

    # time the writer thread's whole batches and the loop's hand building
    batch_time = [0.0, 0]
    run_batch = storage._writer._run_batch

    def timed_batch(conn: Any, batch: Any) -> None:
        t = time.perf_counter()
        run_batch(conn, batch)
        batch_time[0] += time.perf_counter() - t
        batch_time[1] += 1

    storage._writer._run_batch = timed_batch  # type: ignore[method-assign]
    build_time = [0.0]
    new_hand = dealer._new_hand

    def timed_new_hand(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return new_hand(*args, **kwargs)
        finally:
            build_time[0] += time.perf_counter() - t

    dealer._new_hand = timed_new_hand  # type: ignore[method-assign]

    async for _ in await dealer.deal_hands("default", "standard", 2000, (), close):  # warm-up
        pass
    STATS.clear()
    batch_time[:] = [0.0, 0]
    build_time[0] = 0.0
    cpu0, t0 = time.process_time(), time.perf_counter()
    n = 0
    if unary:
        per_worker = hands // unary

        async def worker() -> None:
            for _ in range(per_worker):
                await dealer.deal_new_hand("default", "standard", (), "")

        await asyncio.gather(*(worker() for _ in range(unary)))
        n = per_worker * unary
        what = f"Dealer.deal_new_hand from {unary} concurrent coroutines"
    else:
        async for chunk in await dealer.deal_hands("default", "standard", hands, (), close):
            n += len(chunk)
        what = f"Dealer.deal_hands, close={close}"
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await storage.close()

    print(f"in-process {what}, {n} hands, no gRPC, extra pragmas {pragmas or 'none'}")
    print(f"  wall {wall:.2f} s = {n / wall:,.0f} decks/s; process CPU {cpu / n * 1e6:.0f} us/deck")
    print(f"  loop side:   Dealer._new_hand        {build_time[0] / n * 1e6:7.1f} us/deck")
    print(
        f"  writer side: _run_batch total        {batch_time[0] / n * 1e6:7.1f} us/deck "
        f"({batch_time[1]} transactions)"
    )
    for kind, (count, secs) in sorted(STATS.items(), key=lambda kv: -kv[1][1]):
        print(
            f"    {kind:<38} {secs / n * 1e6:7.1f} us/deck  {count:>8} calls  "
            f"{secs / count * 1e6:8.1f} us/call"
        )
    db = data / "fairdeck.db"
    sizes = {p.name: p.stat().st_size for p in data.iterdir() if p.name.startswith("fairdeck.db")}
    print("  files: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()))
    with sqlite3.connect(db) as conn:
        for table in ("hands", "log_entries", "log_hashes"):
            with contextlib.suppress(sqlite3.OperationalError):
                print(f"  {table}: {conn.execute(f'SELECT COUNT(*) FROM {table}').fetchone()[0]} rows")


def fsync_probe(data: Path) -> None:
    fd = os.open(data / "fsync.probe", os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    for _ in range(200):
        os.write(fd, b"x" * 32768)
        t = time.perf_counter()
        os.fdatasync(fd)
        times.append(time.perf_counter() - t)
    os.close(fd)
    times.sort()
    print(f"fdatasync after a 32 KB write: median {times[100] * 1e3:.2f} ms, p90 {times[180] * 1e3:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hands", type=int, default=100_000)
    ap.add_argument("--close", action="store_true")
    ap.add_argument(
        "--unary", type=int, default=0, metavar="C", help="DealNewHand path from C coroutines instead"
    )
    ap.add_argument("--pragma", action="append", default=[], help="extra PRAGMA after connect (what-if)")
    ap.add_argument("--fsync-probe", action="store_true", help="also time fdatasync on this disk")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairdeck-probe-") as tmp:
        if args.fsync_probe:
            fsync_probe(Path(tmp))
        asyncio.run(probe(args.hands, args.close, Path(tmp), args.pragma, args.unary))


if __name__ == "__main__":
    main()
