"""Transparency-log benchmark: append and proof cost against log size.

One SQLite file (WAL), grown through the sizes in turn (1,000, 100,000 and
1,000,000 entries by default; ``--quick``: 1,000 and 10,000). At each size:

1. **Bulk build** up to the size (not measured, only reported): real commit
   entries (``CommitEntry.encode``, random hand ids and commitments), their
   stored hashes computed by ``merkle.stored_hashes_for_append`` against an
   in-memory copy of the hash array, and inserted with ``executemany`` on a
   separate connection in transactions of 50,000 entries, synchronous=NORMAL.
   The rows are exactly what ``SqliteStorage._append`` writes (checked: the
   hash count is ``stored_hash_count(n)`` and the roots agree with an
   independent left-to-right fold of every leaf).
2. **Proofs at exactly that size**, on a read-only connection with the
   server's own hash reader (``sqlite.reader.hash_reader``): for random leaves an
   inclusion proof (``merkle.prove_inclusion``) and for random older sizes a
   consistency proof to this size (``merkle.prove_consistency``); time and
   hashes read per proof, every proof verified (outside the timing). The same
   proofs are also timed through ``SqliteStorage.inclusion_proof`` /
   ``consistency_proof``, which adds the hop to the writer thread and back.
3. **Appends through the real storage engine**: a fresh ``SqliteStorage``
   (WAL, synchronous=FULL, its one writer thread and group commit) runs
   ``--rounds`` transactions of ``--batch`` entries each. Every transaction
   is one queued operation doing ``storage._append(entry, rows)`` for each
   entry, which is what ``create_hands`` does per hand minus the ``hands``
   row (so only the log's cost is measured). Reported: wall and CPU time per
   appended entry (median of the transactions), and the hash rows written
   (row count of ``log_hashes`` before and after) and read (counted by
   wrapping ``sqlite.reader.hash_reader``) per append.

The appends grow the log past the size, so they are reported with the range
of sizes they covered; the next bulk build continues from there.

    .venv/bin/python bench/log_bench.py            # 1k, 100k, 1M; about 1-2 minutes
    .venv/bin/python bench/log_bench.py --quick    # 1k, 10k; a few seconds
    .venv/bin/python bench/log_bench.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.log import merkle
from fairdeck.log.logentry import CommitEntry
from fairdeck_server.storage.sqlite import SqliteStorage
from fairdeck_server.storage.sqlite import reader as sqlite_reader
from fairdeck_server.storage.sqlite import writer as sqlite_writer

SIZES = (1_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)
BULK_TXN = 50_000
BAR_APPEND_FLAT = 1.5
"""Per-append cost at the largest size may be at most this times the one at the smallest."""
BAR_PROOF_LOG = 2.0
"""Proof time ratio (largest/smallest size) may be at most this times the log2 ratio."""


# --- counting the server's hash reads ------------------------------------------------------------


class ReadCounter:
    """Wraps ``sqlite.reader.hash_reader`` so every batched read is counted (queries and hashes)."""

    def __init__(self) -> None:
        self.queries = 0
        self.hashes = 0
        self.max_batch = 0
        self._original = sqlite_reader.hash_reader

    def install(self) -> None:
        original = self._original

        def counting_reader(conn: sqlite3.Connection) -> Callable[[list[int]], list[bytes]]:
            return self.wrap(original(conn))

        sqlite_writer.hash_reader = counting_reader  # the writer's own reads (catch-up, checkpoints)
        sqlite_reader.hash_reader = counting_reader  # and the readers' (proofs; engine.log_head's roots)

    def wrap(self, read: Callable[[list[int]], list[bytes]]) -> Callable[[list[int]], list[bytes]]:
        def counted(indexes: list[int]) -> list[bytes]:
            self.queries += 1
            self.hashes += len(indexes)
            self.max_batch = max(self.max_batch, len(indexes))
            return read(indexes)

        return counted

    def snapshot(self) -> tuple[int, int]:
        return self.queries, self.hashes


# --- entries and the bulk builder ---------------------------------------------------------------


class EntryMaker:
    """Realistic commit entries (about 110 bytes), reproducible from a seed."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._time = 1_700_000_000_000

    def make(self, count: int) -> list[bytes]:
        rb = self._rng.randbytes
        out = []
        for _ in range(count):
            self._time += 1
            out.append(CommitEntry(self._time, rb(10).hex(), CURRENT_VERSION, "standard", rb(32)).encode())
        return out


class Log:
    """What the log must contain: every leaf hash folded left to right (independent of
    the stored-hash layout), plus an in-memory copy of the stored hashes for the bulk path."""

    def __init__(self) -> None:
        self.size = 0
        self.stored: list[bytes] = []
        self._stack: list[tuple[int, bytes]] = []

    def read(self, indexes: list[int]) -> list[bytes]:
        stored = self.stored
        return [stored[i] for i in indexes]

    def fold(self, leaf: bytes) -> None:
        count, h = 1, leaf
        while self._stack and self._stack[-1][0] == count:
            left_count, left = self._stack.pop()
            count, h = left_count + count, merkle.node_hash(left, h)
        self._stack.append((count, h))
        self.size += 1

    def root(self) -> bytes:
        if not self._stack:
            return merkle.EMPTY_ROOT
        h = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            h = merkle.node_hash(left, h)
        return h


def bulk_extend(db: Path, log: Log, maker: EntryMaker, target: int) -> dict[str, float]:
    """Append entries until the log has ``target`` (the fast path; see the module doc)."""
    started = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")
    added = 0
    try:
        while log.size < target:
            count = min(BULK_TXN, target - log.size)
            entries = maker.make(count)
            first_index = log.size
            first_hash = len(log.stored)
            for entry in entries:
                leaf = merkle.leaf_hash(entry)
                log.stored += merkle.stored_hashes_for_append(log.size, leaf, log.read)
                log.fold(leaf)
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO log_entries (idx, entry) VALUES (?, ?)",
                [(first_index + i, e) for i, e in enumerate(entries)],
            )
            conn.executemany(
                "INSERT INTO log_hashes (idx, hash) VALUES (?, ?)",
                [(i, log.stored[i]) for i in range(first_hash, len(log.stored))],
            )
            conn.execute("COMMIT")
            added += count
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    elapsed = time.perf_counter() - started
    return {"entries": added, "seconds": elapsed, "entries_per_s": added / elapsed if elapsed else 0.0}


def reload_tail(db: Path, log: Log, entries: Sequence[bytes]) -> None:
    """After the storage appended ``entries``, bring the in-memory copy up to date."""
    for entry in entries:
        log.fold(merkle.leaf_hash(entry))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT idx, hash FROM log_hashes WHERE idx >= ? ORDER BY idx", (len(log.stored),)
        ).fetchall()
    finally:
        conn.close()
    for idx, h in rows:
        if idx != len(log.stored):
            raise RuntimeError(f"log_hashes has a gap at {len(log.stored)}")
        log.stored.append(bytes(h))


# --- measurements ------------------------------------------------------------------------------


def measure_proofs(db: Path, n: int, log: Log, count: int, rng: random.Random) -> dict[str, Any]:
    """Inclusion and consistency proofs at size n with the server's hash reader, verified."""
    counter = ReadCounter()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        read = counter.wrap(sqlite_reader.hash_reader(conn))
        root_times = []
        for _ in range(max(1, count // 10)):  # the first read also warms the connection up
            h0 = counter.snapshot()[1]
            t = time.perf_counter()
            root = merkle.tree_hash(n, read)
            root_times.append((time.perf_counter() - t) * 1e6)
            root_hashes = counter.snapshot()[1] - h0
        root_us = statistics.median(root_times)
        if root != log.root():
            raise AssertionError(f"stored tree's root at size {n} differs from the fold of its leaves")
        if merkle.stored_hash_count(n) != conn.execute("SELECT COUNT(*) FROM log_hashes").fetchone()[0]:
            raise AssertionError(f"log_hashes does not hold stored_hash_count({n}) rows")

        incl_us, incl_hashes, incl_queries = [], [], []
        for _ in range(count):
            index = rng.randrange(n)
            q0, h0 = counter.snapshot()
            t = time.perf_counter()
            proof = merkle.prove_inclusion(index, n, read)
            incl_us.append((time.perf_counter() - t) * 1e6)
            q1, h1 = counter.snapshot()
            incl_queries.append(q1 - q0)
            incl_hashes.append(h1 - h0)
            (entry,) = conn.execute("SELECT entry FROM log_entries WHERE idx = ?", (index,)).fetchone()
            merkle.verify_inclusion(index, n, merkle.leaf_hash(bytes(entry)), proof, root)

        cons_us, cons_hashes, cons_queries = [], [], []
        for _ in range(count if n > 1 else 0):
            old = rng.randrange(1, n)
            q0, h0 = counter.snapshot()
            t = time.perf_counter()
            proof = merkle.prove_consistency(old, n, read)
            cons_us.append((time.perf_counter() - t) * 1e6)
            q1, h1 = counter.snapshot()
            cons_queries.append(q1 - q0)
            cons_hashes.append(h1 - h0)
            merkle.verify_consistency(old, n, proof, merkle.tree_hash(old, read), root)
    finally:
        conn.close()
    return {
        "size": n,
        "log2": math.log2(n),
        "root_us": root_us,
        "root_hashes": root_hashes,
        "inclusion": _dist(incl_us, incl_hashes, incl_queries),
        "consistency": _dist(cons_us, cons_hashes, cons_queries),
    }


def _dist(us: list[float], hashes: list[int], queries: list[int]) -> dict[str, float]:
    return {
        "us_median": statistics.median(us),
        "us_p90": _quantile(us, 0.9),
        "hashes_mean": statistics.fmean(hashes),
        "hashes_max": max(hashes),
        "queries_max": max(queries),
        "count": len(us),
    }


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def measure_storage(
    db: Path, n: int, maker: EntryMaker, batch: int, rounds: int, proofs: int, rng: random.Random
) -> tuple[dict[str, Any], list[bytes]]:
    """Proofs through the storage API at size n, then appends through the writer thread."""
    counter = ReadCounter()
    counter.install()
    storage = SqliteStorage(db)
    await storage.start()
    try:
        if await storage.log_size() != n:
            raise AssertionError("the storage does not see the bulk-built log")
        api_incl, api_cons = [], []
        for _ in range(proofs):
            index = rng.randrange(n)
            t = time.perf_counter()
            await storage.inclusion_proof(index, n)
            api_incl.append((time.perf_counter() - t) * 1e6)
            if n > 1:
                old = rng.randrange(1, n)
                t = time.perf_counter()
                await storage.consistency_proof(old, n)
                api_cons.append((time.perf_counter() - t) * 1e6)

        ro = sqlite3.connect(f"file:{db}?mode=ro", uri=True)

        def hash_rows() -> int:
            count: int = ro.execute("SELECT COUNT(*) FROM log_hashes").fetchone()[0]
            return count

        all_entries = maker.make(batch * rounds)
        wall, cpu, written, read, queries = [], [], 0, 0, 0
        counter.max_batch = 0  # from here on: the appends' reads only
        rows_before = hash_rows()
        for r in range(rounds):
            chunk = all_entries[r * batch : (r + 1) * batch]

            def op(conn: sqlite3.Connection, chunk: list[bytes] = chunk) -> list[int]:
                rows = sqlite_writer.Rows()  # as create_hands does: queue, then one executemany per table
                indexes = [storage._writer.tail.append(e, rows) for e in chunk]
                rows.write(conn)
                return indexes

            q0, h0 = counter.snapshot()
            c0 = time.process_time()
            t0 = time.perf_counter()
            await storage._writer.submit(op)
            wall.append((time.perf_counter() - t0) * 1e6 / batch)
            cpu.append((time.process_time() - c0) * 1e6 / batch)
            q1, h1 = counter.snapshot()
            queries += q1 - q0
            read += h1 - h0
        max_read = counter.max_batch
        written = hash_rows() - rows_before
        ro.close()
        size_after = await storage.log_size()
    finally:
        await storage.close()
        sqlite_writer.hash_reader = sqlite_reader.hash_reader = counter._original
    appended = batch * rounds
    return {
        "size_from": n,
        "size_to": size_after,
        "batch": batch,
        "rounds": rounds,
        "wall_us_median": statistics.median(wall),
        "wall_us_min": min(wall),
        "wall_us_max": max(wall),
        "cpu_us_median": statistics.median(cpu),
        "txn_ms_median": statistics.median(wall) * batch / 1000,
        "hash_rows_written_per_append": written / appended,
        "hash_rows_read_per_append": read / appended,
        "read_queries_per_append": queries / appended,
        "max_hashes_read_one_append": max_read,
        "api_inclusion_us_median": statistics.median(api_incl),
        "api_consistency_us_median": statistics.median(api_cons) if api_cons else 0.0,
    }, all_entries


# --- the run ------------------------------------------------------------------------------------


def run(sizes: Sequence[int], workdir: Path, opts: argparse.Namespace) -> dict[str, Any]:
    db = workdir / "fairdeck.db"

    async def create_schema() -> None:
        storage = SqliteStorage(db)
        await storage.start()
        await storage.close()

    asyncio.run(create_schema())
    log = Log()
    maker = EntryMaker(opts.seed)
    rng = random.Random(opts.seed + 1)
    stages = []
    for n in sizes:
        if n < log.size:
            raise SystemExit(f"sizes must grow by more than the appends: {n} < {log.size}")
        build = bulk_extend(db, log, maker, n)
        print(
            f"size {n:>9,}: bulk-built {build['entries']:,} entries in {build['seconds']:.1f}s "
            f"({build['entries_per_s']:,.0f}/s)",
            flush=True,
        )
        proofs = measure_proofs(db, n, log, opts.proofs, rng)
        appends, appended = asyncio.run(
            measure_storage(db, n, maker, opts.batch, opts.rounds, opts.api_proofs, rng)
        )
        reload_tail(db, log, appended)
        stages.append({"size": n, "build": build, "proofs": proofs, "appends": appends})
        print(
            f"  appends {appends['wall_us_median']:.1f} us/entry wall, "
            f"{appends['cpu_us_median']:.1f} us CPU; "
            f"inclusion {proofs['inclusion']['us_median']:.0f} us, "
            f"consistency {proofs['consistency']['us_median']:.0f} us",
            flush=True,
        )
    # The appended tail must leave a consistent tree too.
    final = measure_proofs(db, log.size, log, 10, rng)
    return {"stages": stages, "final_size": final["size"], "db_bytes": db.stat().st_size}


def verdicts(stages: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    first, last = stages[0], stages[-1]
    out = []
    for key, what in (("wall_us_median", "wall"), ("cpu_us_median", "CPU")):
        ratio = last["appends"][key] / first["appends"][key]
        out.append(
            (
                f"per-append {what} time flat (largest/smallest <= {BAR_APPEND_FLAT})",
                ratio <= BAR_APPEND_FLAT,
                f"{first['appends'][key]:.1f} -> {last['appends'][key]:.1f} us, ratio {ratio:.2f}",
            )
        )
    w = [s["appends"]["hash_rows_written_per_append"] for s in stages]
    r = [s["appends"]["hash_rows_read_per_append"] for s in stages]
    out.append(
        (
            # ~2 hashes written per leaf (amortised); reads at most ~1 (0 since appends use the
            # in-memory frontier of the tree)
            "hash rows per append flat (~2 written, <= ~1 read)",
            all(1.8 <= x <= 2.2 for x in w) and all(x <= 1.2 for x in r),
            "written " + ", ".join(f"{x:.3f}" for x in w) + "; read " + ", ".join(f"{x:.3f}" for x in r),
        )
    )
    log_ratio = last["proofs"]["log2"] / first["proofs"]["log2"]
    lin_ratio = last["size"] / first["size"]
    for kind in ("inclusion", "consistency"):
        t0, t1 = first["proofs"][kind]["us_median"], last["proofs"][kind]["us_median"]
        ratio = t1 / t0
        hashes_ok = all(
            s["proofs"][kind]["hashes_max"] <= 2 * math.ceil(s["proofs"]["log2"]) + 2 for s in stages
        )
        out.append(
            (
                f"{kind} proof logarithmic (time ratio <= {BAR_PROOF_LOG} x log2 ratio "
                f"{log_ratio:.2f}; hashes <= 2 log2 n + 2)",
                ratio <= BAR_PROOF_LOG * log_ratio and hashes_ok,
                f"{t0:.0f} -> {t1:.0f} us, ratio {ratio:.2f} (linear would be {lin_ratio:,.0f}); "
                "max hashes " + ", ".join(str(s["proofs"][kind]["hashes_max"]) for s in stages),
            )
        )
    return out


def print_tables(result: dict[str, Any]) -> None:
    stages = result["stages"]
    print()
    print("Appends (SqliteStorage writer thread, WAL + synchronous=FULL, one transaction per batch)")
    print(
        f"{'log size during appends':>25} {'batch':>6} {'us/append':>10} {'(min-max)':>13} {'CPU us':>7} "
        f"{'txn ms':>7} {'hash rows written':>18} {'hash rows read':>15} {'reads/append':>13} {'max read':>9}"
    )
    for s in stages:
        a = s["appends"]
        span = f"{a['size_from']:,} -> {a['size_to']:,}"
        spread = f"{a['wall_us_min']:.0f}-{a['wall_us_max']:.0f}"
        print(
            f"{span:>25} {a['batch']:>6} {a['wall_us_median']:>10.1f} {spread:>13} "
            f"{a['cpu_us_median']:>7.1f} "
            f"{a['txn_ms_median']:>7.1f} {a['hash_rows_written_per_append']:>18.3f} "
            f"{a['hash_rows_read_per_append']:>15.3f} {a['read_queries_per_append']:>13.3f} "
            f"{a['max_hashes_read_one_append']:>9}"
        )
    print()
    print("Proofs at size n (server hash reader, read-only connection; via API = SqliteStorage call)")
    print(
        f"{'n':>10} {'log2 n':>7} {'incl us':>8} {'p90':>6} {'hashes':>10} {'via API':>8} "
        f"{'cons us':>8} {'p90':>6} {'hashes':>10} {'via API':>8} {'root us':>8} {'hashes':>7}"
    )
    for s in stages:
        p, a = s["proofs"], s["appends"]
        i, c = p["inclusion"], p["consistency"]
        ih = f"{i['hashes_mean']:.1f}/{i['hashes_max']}"
        ch = f"{c['hashes_mean']:.1f}/{c['hashes_max']}"
        print(
            f"{s['size']:>10,} {p['log2']:>7.1f} {i['us_median']:>8.0f} {i['us_p90']:>6.0f} {ih:>10} "
            f"{a['api_inclusion_us_median']:>8.0f} {c['us_median']:>8.0f} {c['us_p90']:>6.0f} {ch:>10} "
            f"{a['api_consistency_us_median']:>8.0f} {p['root_us']:>8.0f} {p['root_hashes']:>7}"
        )
    print("  (us = median microseconds; hashes = mean/max hashes read per proof; one SQL query per proof)")
    print()
    build = sum(s["build"]["seconds"] for s in stages)
    print(
        f"bulk build total {build:.1f}s; final log {result['final_size']:,} entries, "
        f"db {result['db_bytes'] / 1e6:.0f} MB"
    )
    print()
    for name, ok, detail in verdicts(stages):
        print(f"{'PASS' if ok else 'MISS'}  {name}: {detail}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sizes 1,000 and 10,000")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], help="comma-separated sizes")
    ap.add_argument("--batch", type=int, default=256, help="entries per append transaction (default 256)")
    ap.add_argument("--rounds", type=int, default=16, help="append transactions per size (default 16)")
    ap.add_argument("--proofs", type=int, default=500, help="proofs of each kind per size (default 500)")
    ap.add_argument(
        "--api-proofs", type=int, default=200, help="proofs through the storage API (default 200)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", type=Path, help="work directory (default: a temporary one, removed)")
    ap.add_argument("--json", type=Path, help="write the raw results here")
    opts = ap.parse_args()
    sizes = opts.sizes or (QUICK_SIZES if opts.quick else SIZES)
    print(
        f"log_bench: sizes {', '.join(f'{n:,}' for n in sizes)}; {platform.python_version()} "
        f"sqlite {sqlite3.sqlite_version}; {os.cpu_count()} CPUs",
        flush=True,
    )
    started = time.perf_counter()
    tmp = None
    if opts.dir is None:
        tmp = tempfile.mkdtemp(prefix="fairdeck-logbench-")
        workdir = Path(tmp)
    else:
        workdir = opts.dir
        workdir.mkdir(parents=True, exist_ok=True)
        if (workdir / "fairdeck.db").exists():
            raise SystemExit(f"{workdir}/fairdeck.db exists; give an empty --dir")
    try:
        result = run(sizes, workdir, opts)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print_tables(result)
    total = time.perf_counter() - started
    print(f"\ntotal {total:.0f}s")
    if opts.json:
        result["verdicts"] = [{"bar": n, "pass": ok, "detail": d} for n, ok, d in verdicts(result["stages"])]
        result["seconds"] = total
        opts.json.write_text(json.dumps(result, indent=2))
    return 0 if all(ok for _, ok, _ in verdicts(result["stages"])) else 1


if __name__ == "__main__":
    sys.exit(main())
