"""The storage alone, for replica_bench.py: ``replica_bench.py storage`` processes call
PostgresStorage.create_hands directly (no gRPC, no dealer) with C coroutines, one process
standing for one replica; the parent runs them in rounds and reads PostgreSQL's CPU and WAL
over their common window. Then the serial section: EXPLAIN ANALYZE of the engine's write
statement for batches of k new hands, and the line fitted through it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from loadgen import machine_cpu, percentile
from replica_measure import (
    QUIET,
    cpu_of,
    cpu_used,
    median_known,
    pg_pids,
    progress,
    wal_per_call,
    wal_snapshot,
)
from server_process import PYTHON

SCRIPT = Path(__file__).resolve().with_name("replica_bench.py")
"""The command the storage processes run as (``replica_bench.py storage``)."""

# -- the storage alone (its own process) --------------------------------------------------------------


async def storage_load(args: argparse.Namespace) -> dict[str, Any]:
    """C coroutines calling PostgresStorage.create_hands with one DealNewHand-sized hand each."""
    from fairdeck_server.storage.postgres import PostgresStorage

    prefix = secrets.token_hex(4)
    counter = iter(range(10**9))

    def new_hand() -> Any:
        return _bench_hand(f"{prefix}{next(counter):012x}")

    storage = PostgresStorage(args.url, max_size=4)
    await storage.start()
    await storage.create_hands([new_hand()])
    late = time.time() - args.start_at
    await asyncio.sleep(max(0.0, -late))  # replicas start their windows together
    now = time.perf_counter()
    t_start, t_end = now + args.warmup, now + args.warmup + args.duration
    latencies: list[float] = []
    marks: dict[str, tuple[Any, ...]] = {}

    def mark(name: str) -> None:
        s = storage.stats
        marks[name] = (
            time.perf_counter(), time.process_time(), 0.0,
            s.batches, s.operations, s.appends, s.lock_wait_seconds or 0.0, s.hashing_seconds or 0.0,
            s.transaction_seconds,
        )  # fmt: skip

    async def worker() -> None:
        perf = time.perf_counter
        while True:
            t0 = perf()
            if t0 >= t_end:
                return
            await storage.create_hands([new_hand()])
            t1 = perf()
            if t_start <= t1 < t_end:
                latencies.append(t1 - t0)

    loop = asyncio.get_running_loop()
    loop.call_at(loop.time() + args.warmup, mark, "start")
    loop.call_at(loop.time() + args.warmup + args.duration, mark, "end")
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    await asyncio.sleep(2.0)  # connections stay open while the parent reads PostgreSQL's CPU
    await storage.close()
    a, b = marks["start"], marks["end"]
    window, n = b[0] - a[0], len(latencies)
    batches = b[3] - a[3]
    latencies.sort()
    return {
        "concurrency": args.concurrency,
        "calls": n,
        "calls_per_s": n / window,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "process_cpu_us_per_call": (b[1] - a[1]) / n * 1e6 if n else None,
        "batches": batches,
        "appends_per_batch": (b[5] - a[5]) / batches if batches else None,
        "lock_wait_ms_per_batch": (b[6] - a[6]) / batches * 1e3 if batches else None,
        "hashing_ms_per_batch": (b[7] - a[7]) / batches * 1e3 if batches else None,
        "transaction_ms_per_batch": (b[8] - a[8]) / batches * 1e3 if batches else None,
        "batches_per_s": batches / window,
        "late_s": max(0.0, late),
    }


def run_storage(url_for: Any, datadir: Path, pg_url: str, opts: argparse.Namespace) -> list[dict[str, Any]]:
    """Storage alone: one process at several concurrencies, and two processes at once, in
    rounds (order rotating); the median of the rounds per configuration."""
    plans = [(1, c) for c in opts.storage_concurrency] + [(2, c) for c in opts.storage_concurrency[-2:]]
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {plan: [] for plan in plans}
    for r in range(opts.storage_rounds):
        for procs, c in plans[r % len(plans) :] + plans[: r % len(plans)]:
            row = storage_run(url_for(), datadir, pg_url, procs, c, opts)
            runs[procs, c].append(row)
            progress(
                f"storage round {r + 1} x{procs} c={c:<3} {row['calls_per_s']:7.0f} calls/s  "
                f"p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:6.2f} ms  "
                f"{row['appends_per_batch']:5.1f} appends/batch  {row['batches_per_s']:5.0f} batches/s  "
                f"lock wait {row['lock_wait_ms_per_batch']:5.2f} ms  "
                f"hashing {row['hashing_ms_per_batch']:5.2f} ms  "
                f"txn {row['transaction_ms_per_batch']:5.2f} ms  "
                f"process {row['process_cpu_us_per_call']:4.0f} us/call  "
                f"pg {row['pg_cpu_us_per_call']:4.0f} us/call  wal {row['wal_bytes_per_call']:5.0f} B/call, "
                f"{row['wal_syncs_per_s']:4.0f} syncs/s of {row['wal_sync_ms'] or 0:5.2f} ms  "
                f"other cpu {row['other_cpu_util']:.0%}"
                + (f"  LATE {row['late_s']:.1f} s" if row["late_s"] > 0.5 else "")
            )
    out = []
    for (procs, c), rows in runs.items():
        quiet = [x for x in rows if x["other_cpu_util"] < QUIET]
        used = quiet or rows
        merged: dict[str, Any] = {
            "processes": procs,
            "concurrency_each": c,
            "rounds": len(rows),
            "quiet_rounds": len(quiet),
            "from": "quiet rounds" if quiet else "all rounds (none was quiet)",
        }
        for key in rows[0]:
            if key not in merged:
                merged[key] = median_known([x[key] for x in used])
        merged["calls_per_s_all"] = [round(x["calls_per_s"]) for x in rows]
        out.append(merged)
    return out


def serial_section(url: str, sizes: list[int], reps: int = 15) -> list[dict[str, float]]:
    """Server-side cost of one batch's write statement, which holds the log lock from
    fairdeck_append to COMMIT: EXPLAIN ANALYZE of the real statement with k new hands
    (each run rolled back), median execution and planning time. The WAL flush at
    COMMIT comes on top (pg_stat_wal, in the storage runs)."""
    import psycopg

    from fairdeck_server.storage.postgres import PostgresStorage
    from fairdeck_server.storage.postgres import writer as engine

    async def fill() -> None:
        storage = PostgresStorage(url)
        await storage.start()
        for i in range(4):  # a log of a few thousand entries, like the runs'
            await storage.create_hands([_bench_hand(f"fill{i}-{j}") for j in range(512)])
        await storage.close()

    asyncio.run(fill())
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        for k in sizes:
            execs, plans = [], []
            for rep in range(reps):
                batch = engine.BatchWrites()
                for i in range(k):
                    hand = _bench_hand(f"serial{k}-{rep}-{i}")
                    batch.inserts.append((hand.record, batch.append(hand.log_entry), None))
                conn.execute("BEGIN")
                cur = conn.execute(
                    "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + engine._APPEND,
                    (engine._append_doc(batch),),
                )
                row = cur.fetchone()
                conn.execute("ROLLBACK")
                assert row is not None
                report = row[0][0]
                execs.append(report["Execution Time"])
                plans.append(report.get("Planning Time", 0.0))
            warm = slice(3, None)
            out.append(
                {
                    "appends": k,
                    "execution_ms": statistics.median(execs[warm]),
                    "planning_ms": statistics.median(plans[warm]),
                }
            )
            progress(f"serial section k={k:<4} execution {out[-1]['execution_ms']:.3f} ms")
    return out


def _bench_hand(hand_id: str) -> Any:
    """A hand the size of DealNewHand's (sealed seed, commitment, commit entry)."""
    from fairdeck.core.commitment import commit
    from fairdeck.core.versions import CURRENT_VERSION
    from fairdeck.log.logentry import CommitEntry
    from fairdeck_server.storage.base import HandRecord, NewHand, StoredHandState

    now = time.time_ns() // 1_000_000
    seed = secrets.token_bytes(45)
    commitment = commit("standard", hand_id, seed)
    record = HandRecord(
        tenant="bench", hand_id=hand_id, request_id=None, deck="standard", version=CURRENT_VERSION,
        commitment=commitment, sealed_seed=secrets.token_bytes(78), client_seeds=(),
        state=StoredHandState.SHUFFLED, dealt=52, created_ms=now, commit_index=-1,
    )  # fmt: skip
    return NewHand(record, CommitEntry(now, hand_id, CURRENT_VERSION, "standard", commitment).encode())


def storage_run(
    url: str, datadir: Path, pg_url: str, procs: int, c: int, opts: argparse.Namespace
) -> dict[str, Any]:
    """One storage-alone run: ``procs`` processes with ``c`` coroutines each, one common window.
    PostgreSQL's CPU and WAL are measured here, over that window."""
    import psycopg

    start_at = time.time() + 6.0  # time for every process to import and connect
    argv = [
        "--url", url, "--concurrency", str(c),
        "--warmup", str(opts.warmup), "--duration", str(opts.duration), "--start-at", str(start_at),
    ]  # fmt: skip
    script = str(SCRIPT)
    running = [
        subprocess.Popen([PYTHON, script, "storage", *argv], stdout=subprocess.PIPE, text=True)
        for _ in range(procs)
    ]
    with psycopg.connect(pg_url, autocommit=True) as pg:
        time.sleep(max(0.0, start_at + opts.warmup - time.time()))
        cpu0, wal0, t0, m0 = cpu_of(pg_pids(datadir)), wal_snapshot(pg), time.perf_counter(), machine_cpu()
        time.sleep(opts.duration)
        cpu1, wal1, t1, m1 = cpu_of(pg_pids(datadir)), wal_snapshot(pg), time.perf_counter(), machine_cpu()
    results = []
    for p in running:
        stdout, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError("storage run failed")
        results.append(json.loads(stdout))
    calls = sum(x["calls"] for x in results)
    pg_cpu = cpu_used(cpu0, cpu1)
    own_cpu = sum(x["process_cpu_us_per_call"] * x["calls"] / 1e6 for x in results)
    return {
        "calls_per_s": sum(x["calls_per_s"] for x in results),
        "p50_ms": max(x["p50_ms"] for x in results),
        "p99_ms": max(x["p99_ms"] for x in results),
        "process_cpu_us_per_call": statistics.fmean(x["process_cpu_us_per_call"] for x in results),
        "pg_cpu_us_per_call": pg_cpu / calls * 1e6 if calls else None,
        "late_s": max(x["late_s"] for x in results),
        # everything else on the machine: all busy CPU minus these processes and PostgreSQL
        "other_cpu_util": ((m1[0] - m0[0]) - pg_cpu - own_cpu) / (t1 - t0),
        **wal_per_call(wal0, wal1, calls, t1 - t0),
        "batches": sum(x["batches"] for x in results),
        "appends_per_batch": statistics.fmean(x["appends_per_batch"] for x in results),
        "lock_wait_ms_per_batch": statistics.fmean(x["lock_wait_ms_per_batch"] for x in results),
        "hashing_ms_per_batch": statistics.fmean(x["hashing_ms_per_batch"] for x in results),
        "transaction_ms_per_batch": statistics.fmean(x["transaction_ms_per_batch"] for x in results),
        "batches_per_s": sum(x["batches_per_s"] for x in results),
    }


def fit(serial: list[dict[str, float]]) -> dict[str, float] | None:
    """Least squares of the write statement's execution time (ms) against appends:
    exec = a + b * appends; the log lock is held for about that plus the WAL flush."""
    pts = [(x["appends"], x["execution_ms"]) for x in serial]
    if len(pts) < 2:
        return None
    mx, my = statistics.fmean(p[0] for p in pts), statistics.fmean(p[1] for p in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    return {"fixed_ms": my - b * mx, "per_append_ms": b}
