"""The floor under the SQLite writer: one DealNewHand-sized transaction in a bare loop.

The statements the writer runs for one hand alone in a transaction (BEGIN IMMEDIATE,
a savepoint, the log entry, one Merkle hash, the hand row, RELEASE, COMMIT) on the real
schema, from Python with nothing else running, with synchronous FULL (the dealer's),
NORMAL and OFF. User and system CPU per transaction show what durability itself costs
before any of the dealer's Python. bench/README.md, "Current figures and verdicts".

    .venv/bin/python bench/sqlite_txn_probe.py [--transactions 2000]
"""

from __future__ import annotations

import argparse
import os
import secrets
import sqlite3
import tempfile
import time

from fairdeck_server.storage.sqlite import SCHEMA


def run(synchronous: str, n: int) -> None:
    directory = tempfile.mkdtemp(prefix="fairdeck-txn-probe-")
    conn = sqlite3.connect(os.path.join(directory, "fairdeck.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.executescript(SCHEMA)
    wall, cpu = time.perf_counter(), os.times()
    for i in range(n):
        hand_id = f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(5)}"
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("SAVEPOINT op")
        conn.execute("INSERT INTO log_entries (idx, entry) VALUES (?, ?)", (i, secrets.token_bytes(90)))
        conn.execute("INSERT INTO log_hashes (idx, hash) VALUES (?, ?)", (2 * i, secrets.token_bytes(32)))
        sealed = secrets.token_bytes(77)
        row = (hand_id, "t", None, "standard", "fairdeck-v1", secrets.token_bytes(32), sealed, bytes(4))
        row += (2, 52, 1_700_000_000_000 + i, i, None, None, None, None)
        conn.execute("INSERT INTO hands VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
        conn.execute("RELEASE op")
        conn.execute("COMMIT")
    after = os.times()
    took = time.perf_counter() - wall
    print(
        f"synchronous={synchronous:<6} wall {took / n * 1e6:6.0f} us/transaction  "
        f"user {(after.user - cpu.user) / n * 1e6:5.0f}  "
        f"system {(after.system - cpu.system) / n * 1e6:5.0f} us"
    )
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transactions", type=int, default=2000)
    n = ap.parse_args().transactions
    for synchronous in ("FULL", "NORMAL", "OFF", "FULL"):
        run(synchronous, n)


if __name__ == "__main__":
    main()
