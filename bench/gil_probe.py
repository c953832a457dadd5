"""Why the SQLite writer thread makes few SQLite calls: a GIL hand-off per call.

CPython's sqlite3 releases the GIL around every ``sqlite3_step``, and a thread that
wants it back while another thread runs Python waits for that thread to let go: at
worst a whole ``sys.getswitchinterval()`` (5 ms). The dealer's writer thread shares
the GIL with a busy event loop, so the number of SQLite calls per transaction, not
their cost, sets its pace. This probe inserts 256-row batches (one transaction each,
synchronous=OFF so the disk is out of it) as ``executemany`` (one step per row) and
as one multi-row INSERT (one step), alone and with a thread spinning in Python beside
it, alternating, and prints wall and CPU time per row. bench/README.md, section 2.

    .venv/bin/python bench/gil_probe.py
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import tempfile
import threading
import time

ROWS = 256
BATCHES = 40


def _connection(directory: str, name: str) -> sqlite3.Connection:
    conn = sqlite3.connect(os.path.join(directory, name), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("CREATE TABLE t (idx INTEGER PRIMARY KEY, entry BLOB NOT NULL)")
    return conn


def _run(conn: sqlite3.Connection, mode: str) -> tuple[float, float]:
    """(wall us per row, this thread's CPU us per row)."""
    base = 0
    multi = "INSERT INTO t VALUES " + ", ".join(["(?, ?)"] * ROWS)
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(BATCHES):
        rows = [(base + i, secrets.token_bytes(120)) for i in range(ROWS)]
        base += ROWS
        conn.execute("BEGIN")
        if mode == "executemany":
            conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
        else:
            conn.execute(multi, [v for row in rows for v in row])
        conn.execute("COMMIT")
    n = ROWS * BATCHES
    return (time.perf_counter() - wall) / n * 1e6, (time.thread_time() - cpu) / n * 1e6


def _spin(spinning: threading.Event) -> None:
    x = 0
    while spinning.is_set():
        x += 1


def main() -> None:
    directory = tempfile.mkdtemp(prefix="fairdeck-gil-probe-")
    print(f"{ROWS}-row transactions x {BATCHES}, synchronous=OFF; us per row (wall / this thread's CPU)")
    for busy in (False, True):
        spinning = threading.Event()
        spinner = None
        if busy:
            spinning.set()

            spinner = threading.Thread(target=_spin, args=(spinning,), daemon=True)
            spinner.start()
        for attempt in range(2):
            for mode in ("executemany", "multi-row"):
                wall, cpu = _run(_connection(directory, f"{mode}-{busy}-{attempt}.db"), mode)
                beside = "a Python thread spinning beside it" if busy else "alone"
                print(f"  {mode:<12} {beside:<36} wall {wall:9.2f}  cpu {cpu:6.2f}")
        spinning.clear()
        if spinner is not None:
            spinner.join()


if __name__ == "__main__":
    main()
