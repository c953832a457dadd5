"""What SQLite's automatic WAL checkpoint adds to the COMMITs that carry it.

Batches shaped like the bulk dealer's (32 hand rows and 64 log entries, random bytes, in two
tables of their own, not the dealer's schema) committed in a loop for ``--seconds``, in WAL mode
with synchronous=FULL as the dealer's writer runs, once with ``wal_autocheckpoint`` at SQLite's
default (1,000 pages: the COMMIT that passes it checkpoints, on the writer's thread) and once
with it off. Prints COMMIT p50/p99/max. bench/README.md, section 13 (fourth session).

    .venv/bin/python bench/wal_checkpoint_probe.py [--seconds 20] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time


def run(directory: str, autocheckpoint: int, seconds: float) -> str:
    path = os.path.join(tempfile.mkdtemp(prefix="fairdeck-wal-probe-", dir=directory), "probe.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
    conn.execute("CREATE TABLE hand(id TEXT PRIMARY KEY, seed BLOB, deck BLOB, commitment BLOB)")
    conn.execute("CREATE TABLE entry(i INTEGER PRIMARY KEY, leaf BLOB)")
    took: list[float] = []
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rows = [(f"{n + i:016x}", os.urandom(32), os.urandom(52), os.urandom(32)) for i in range(32)]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO hand VALUES (?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO entry(leaf) VALUES (?)", [(os.urandom(120),) for _ in range(64)])
        start = time.perf_counter()
        conn.execute("COMMIT")
        took.append((time.perf_counter() - start) * 1000)
        n += 32
    conn.close()
    took.sort()
    return (
        f"wal_autocheckpoint={autocheckpoint}: {len(took)} commits, {n} hands, COMMIT p50 "
        f"{took[len(took) // 2]:.2f} ms, p99 {took[int(len(took) * 0.99)]:.2f} ms, max {took[-1]:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the database goes (/tmp)")
    opts = ap.parse_args()
    for autocheckpoint in (1000, 0):
        print(run(opts.dir, autocheckpoint, opts.seconds), flush=True)


if __name__ == "__main__":
    main()
