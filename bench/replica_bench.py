"""Replica benchmark: one dealer vs two dealers on the same PostgreSQL, one dealer of 1, 2, ...
processes on one SQLite file (``serve --processes N``), and what the storage engine costs.

One run, one machine. The script starts its own throwaway PostgreSQL cluster
(tests/support/pgcluster.py, fsync ON: commits wait for the disk, as in production)
and the dealers (``fairdeck serve``), all idle until driven:

- ``pg-1``: one replica on database A;
- ``pg-2``: two replicas on database B, sharing the seed and log keys;
- ``sqlite-N``: one dealer of N serving processes on one SQLite file (WAL, synchronous=FULL),
  for each N of ``--sqlite-processes`` (default 1 2).

The load opens ``--connections`` TCP connections in all (default 4), spread over a
configuration's replicas: ``serve --processes N`` spreads connections, not calls, over its
processes. Dealer CPU counts every process of a configuration (a supervisor and its workers).

1. **Same load, side by side.** For each round and each concurrency, one load
   generator process (this script, ``load``) keeps C DealNewHand calls in
   flight, spread round-robin over the configuration's replicas, for a warm-up
   and a measured window. The configurations alternate, and their order
   rotates every round. Reported: median over rounds of calls/s, p50, p99, and
   the CPU per call of the dealers, of PostgreSQL (the postmaster and all its
   children, from /proc) and of the load generator.
2. **The storage alone.** ``storage`` processes drive PostgresStorage.create_hands
   directly (no gRPC, no dealer), each with C coroutines, one process as one
   replica and two at once as two. Each call stores one hand of the same size
   as DealNewHand's (sealed seed, commitment, commit entry). Reported: calls/s,
   latency, the writer's batches, the time waiting for and holding the log
   lock per batch, and CPU per call of the process and of PostgreSQL. The lock
   hold time per batch against appends per batch gives the ceiling of one
   log's appends per second (docs/scaling.md).

The machine has few cores, shared by the load generator, the dealers and
PostgreSQL; ``other cpu`` is what everything else used meanwhile.

    .venv/bin/python bench/replica_bench.py            # ~4 minutes
    .venv/bin/python bench/replica_bench.py --quick    # ~1 minute
    .venv/bin/python bench/replica_bench.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # tests.support.pgcluster, shared with the test suite

import grpc  # noqa: E402
from loadgen import METHOD, OPTIONS, machine_cpu, percentile, proc_cpu  # noqa: E402
from server_process import Server  # noqa: E402

from fairdeck.v1 import dealer_pb2 as pb  # noqa: E402

PYTHON = sys.executable
QUIET = 0.3
"""A round is quiet when everything else on the machine used under 30% of a CPU meanwhile."""


# -- processes ----------------------------------------------------------------------------------------


class Dealer(Server):
    """A ``fairdeck serve`` subprocess, without the caller's FAIRDECK_* settings."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRDECK_")}
        super().__init__(name, argv, log, env)


def start_dealer(name: str, tmp: Path, db: str | None, keys: tuple[Path, Path], processes: int = 1) -> Dealer:
    argv = [PYTHON, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", "--data", str(tmp / name)]
    argv += ["--rate-limit", "0", "--max-open-hands", "0", "--log-level", "WARNING"]
    argv += ["--processes", str(processes)]
    if db is not None:  # replicas share their keys; a SQLite dealer makes its own in its fresh data dir
        argv += ["--db", db, "--seed-key-file", str(keys[0]), "--log-key-file", str(keys[1])]
    return Dealer(name, argv, tmp / f"{name}.log")


def pg_pids(datadir: Path) -> list[int]:
    """The postmaster and its children (backends, WAL writer, checkpointer...)."""
    postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == postmaster:
                pids.append(int(entry))
    return pids


WAL_FIELDS = (
    "wal_records",
    "wal_fpi",
    "wal_bytes",
    "wal_write",
    "wal_sync",
    "wal_write_time",
    "wal_sync_time",
)


def wal_snapshot(conn: Any) -> dict[str, float]:
    """pg_stat_wal, cluster-wide (times in ms; track_wal_io_timing is on in this cluster)."""
    row = conn.execute(f"SELECT {', '.join(WAL_FIELDS)} FROM pg_stat_wal").fetchone()
    return {k: float(v) for k, v in zip(WAL_FIELDS, row, strict=True)}


def wal_per_call(w0: dict[str, float], w1: dict[str, float], calls: int, window: float) -> dict[str, Any]:
    d = {k: w1[k] - w0[k] for k in WAL_FIELDS}
    return {
        "wal_bytes_per_call": d["wal_bytes"] / calls if calls else None,
        "wal_fpi_per_call": d["wal_fpi"] / calls if calls else None,
        "wal_syncs_per_s": d["wal_sync"] / window,
        "wal_sync_ms": d["wal_sync_time"] / d["wal_sync"] if d["wal_sync"] else None,
        "wal_write_ms": d["wal_write_time"] / d["wal_write"] if d["wal_write"] else None,
    }


def cpu_of(pids: list[int]) -> dict[int, float]:
    """CPU seconds so far of each process still alive."""
    out = {}
    for pid in pids:
        with contextlib.suppress(OSError):  # exited meanwhile
            out[pid] = proc_cpu(pid) or 0.0
    return out


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings: of processes alive at both, plus all of new ones
    (a process that exited in between is left out rather than counted negative)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


# -- the load generator (its own process) -------------------------------------------------------------


async def load(args: argparse.Namespace) -> dict[str, Any]:
    """C DealNewHand calls in flight, round-robin over the targets; one JSON result."""
    targets = args.targets.split(",")
    # args.connections TCP connections in all, spread over the targets: each channel with its own
    # subchannel pool (gRPC would otherwise share one connection among channels to one target),
    # so that `serve --processes N` (SO_REUSEPORT spreads connections, not calls) sees several.
    own = [*OPTIONS, ("grpc.use_local_subchannel_pool", 1)]
    per_target = max(1, args.connections // len(targets))
    channels = [grpc.aio.insecure_channel(t, options=own) for t in targets for _ in range(per_target)]
    for ch in channels:
        await asyncio.wait_for(ch.channel_ready(), 10)
    calls = [ch.unary_unary(METHOD) for ch in channels]
    request = pb.DealNewHandRequest(deck="standard").SerializeToString()
    for call in calls:
        pb.DealNewHandResponse.FromString(await call(request, timeout=10))
    dealer_pids = [int(p) for p in args.dealer_pids.split(",")]
    datadir = Path(args.pg_datadir) if args.pg_datadir else None
    import psycopg

    pg = psycopg.connect(args.pg_url, autocommit=True)  # opened now: a mark costs one query
    wal: dict[str, dict[str, float]] = {}

    now = time.perf_counter()
    t_start, t_end = now + args.warmup, now + args.warmup + args.duration
    latencies: list[float] = []
    errors: dict[str, int] = {}
    marks: dict[str, tuple[Any, ...]] = {}

    def mark(name: str) -> None:
        pg_cpu = cpu_of(pg_pids(datadir)) if datadir is not None else {}
        busy, steal = machine_cpu()
        dealers = sum(proc_cpu(p) or 0.0 for p in dealer_pids)
        marks[name] = (time.perf_counter(), time.process_time(), dealers, pg_cpu, busy, steal)
        wal[name] = wal_snapshot(pg)

    async def worker(call: Any) -> None:
        perf = time.perf_counter
        while True:
            t0 = perf()
            if t0 >= t_end:
                return
            try:
                await call(request, timeout=30)
            except grpc.aio.AioRpcError as e:
                errors[e.code().name] = errors.get(e.code().name, 0) + 1
                continue
            t1 = perf()
            if t_start <= t1 < t_end:
                latencies.append(t1 - t0)

    loop = asyncio.get_running_loop()
    loop.call_at(loop.time() + (t_start - time.perf_counter()), mark, "start")
    loop.call_at(loop.time() + (t_end - time.perf_counter()), mark, "end")
    await asyncio.gather(*(worker(calls[i % len(calls)]) for i in range(args.concurrency)))
    for ch in channels:
        await ch.close()
    pg.close()
    (w0, c0, d0, p0, b0, s0), (w1, c1, d1, p1, b1, s1) = marks["start"], marks["end"]
    window, n = w1 - w0, len(latencies)
    pg_cpu = cpu_used(p0, p1)
    latencies.sort()
    return {
        "targets": len(targets),
        "concurrency": args.concurrency,
        "calls": n,
        "calls_per_s": n / window,
        "errors": errors,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "dealer_cpu_us_per_call": (d1 - d0) / n * 1e6 if n else None,
        "pg_cpu_us_per_call": pg_cpu / n * 1e6 if n else None,
        "client_cpu_us_per_call": (c1 - c0) / n * 1e6 if n else None,
        "dealer_cpu_util": (d1 - d0) / window,
        "pg_cpu_util": pg_cpu / window,
        "client_cpu_util": (c1 - c0) / window,
        "other_cpu_util": ((b1 - b0) - (d1 - d0) - pg_cpu - (c1 - c0)) / window,
        "steal_util": (s1 - s0) / window,
        **wal_per_call(wal["start"], wal["end"], n, window),
    }


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


# -- the run --------------------------------------------------------------------------------------------


def _sub(mode: str, *args: str) -> dict[str, Any]:
    argv = [PYTHON, str(Path(__file__).resolve()), mode, *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_configs(
    configs: dict[str, list[Dealer]], datadir: Path, pg_url: str, opts: argparse.Namespace
) -> dict[int, dict[str, list[dict[str, Any]]]]:
    results: dict[int, dict[str, list[dict[str, Any]]]] = {
        c: {k: [] for k in configs} for c in opts.concurrency
    }
    names = list(configs)
    for r in range(opts.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for c in opts.concurrency:
            for name in order:
                dealers = configs[name]
                res = _sub(
                    "load",
                    "--targets", ",".join(d.target for d in dealers),
                    "--dealer-pids", ",".join(str(pid) for d in dealers for pid in d.pids),
                    "--connections", str(opts.connections),
                    "--pg-datadir", str(datadir),
                    "--pg-url", pg_url,
                    "--concurrency", str(c),
                    "--warmup", str(opts.warmup),
                    "--duration", str(opts.duration),
                )  # fmt: skip
                results[c][name].append(res)
                _progress(
                    f"round {r + 1} c={c:<3} {name:<6} {res['calls_per_s']:7.0f} calls/s  "
                    f"p50 {res['p50_ms']:6.2f} ms  p99 {res['p99_ms']:6.2f} ms  "
                    f"dealer {res['dealer_cpu_us_per_call']:4.0f} us/call  "
                    f"pg {res['pg_cpu_us_per_call']:4.0f} us/call  "
                    f"client {res['client_cpu_us_per_call']:4.0f} us/call  "
                    f"wal {res['wal_bytes_per_call']:5.0f} B/call, {res['wal_syncs_per_s']:4.0f} syncs/s "
                    f"of {res['wal_sync_ms'] or 0:5.2f} ms  "
                    f"other cpu {res['other_cpu_util']:.0%}  errors {sum(res['errors'].values())}"
                )
    return results


def run_storage(url_for: Any, datadir: Path, pg_url: str, opts: argparse.Namespace) -> list[dict[str, Any]]:
    """Storage alone: one process at several concurrencies, and two processes at once, in
    rounds (order rotating); the median of the rounds per configuration."""
    plans = [(1, c) for c in opts.storage_concurrency] + [(2, c) for c in opts.storage_concurrency[-2:]]
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {plan: [] for plan in plans}
    for r in range(opts.storage_rounds):
        for procs, c in plans[r % len(plans) :] + plans[: r % len(plans)]:
            row = storage_run(url_for(), datadir, pg_url, procs, c, opts)
            runs[procs, c].append(row)
            _progress(
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
                merged[key] = _median([x[key] for x in used])
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
                batch = engine._Batch()
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
            _progress(f"serial section k={k:<4} execution {out[-1]['execution_ms']:.3f} ms")
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
    script = str(Path(__file__).resolve())
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


def table_sizes(url: str) -> dict[str, Any]:
    """Bytes on disk (tables, indexes, TOAST) per hand and per log entry, from the pg-1 database."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        sizes = dict(
            conn.execute(
                "SELECT relname::text, pg_total_relation_size(oid) FROM pg_class "
                "WHERE relname IN ('hands', 'log_entries', 'log_hashes', 'checkpoints')"
            ).fetchall()
        )
        (hands,) = conn.execute("SELECT count(*) FROM hands").fetchone() or (0,)
        (entries,) = conn.execute("SELECT count(*) FROM log_entries").fetchone() or (0,)
    return {
        "hands": hands,
        "entries": entries,
        "bytes": sizes,
        "hand_bytes_per_hand": sizes.get("hands", 0) / max(hands, 1),
        "log_bytes_per_entry": (sizes.get("log_entries", 0) + sizes.get("log_hashes", 0)) / max(entries, 1),
    }


def summarize(results: dict[int, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    keys = (
        "calls_per_s", "p50_ms", "p99_ms", "dealer_cpu_us_per_call", "pg_cpu_us_per_call",
        "client_cpu_us_per_call", "dealer_cpu_util", "pg_cpu_util", "client_cpu_util", "other_cpu_util",
        "wal_bytes_per_call", "wal_fpi_per_call", "wal_syncs_per_s", "wal_sync_ms",
    )  # fmt: skip
    rows = []
    for c, by in results.items():
        row: dict[str, Any] = {"concurrency": c}
        for name, rs in by.items():
            row[name] = {k: _median([x[k] for x in rs]) for k in keys}
            row[name]["calls_per_s_all"] = [round(x["calls_per_s"]) for x in rs]
            quiet = [x for x in rs if x["other_cpu_util"] < QUIET]
            row[name]["quiet_rounds"] = len(quiet)
            for k in ("calls_per_s", "p50_ms", "p99_ms", "dealer_cpu_us_per_call", "pg_cpu_us_per_call"):
                row[name][f"quiet_{k}"] = _median([x[k] for x in quiet])
            row[name]["errors"] = sum(sum(x["errors"].values()) for x in rs)
        row["configs"] = list(by)
        for name in by:
            base = "pg-1" if name.startswith("pg-") else "sqlite-1"
            if name != base and base in by:
                ratios = [
                    x["calls_per_s"] / y["calls_per_s"] for x, y in zip(by[name], by[base], strict=True)
                ]
                row[f"{name}/{base}"] = {
                    "median": statistics.median(ratios),
                    "min": min(ratios),
                    "max": max(ratios),
                }
        rows.append(row)
    return rows


def _median(xs: list[Any]) -> float | None:
    known = [x for x in xs if x is not None]
    return statistics.median(known) if known else None


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode")
    lg = sub.add_parser("load")
    lg.add_argument("--targets", required=True)
    lg.add_argument("--dealer-pids", required=True)
    lg.add_argument("--pg-datadir", default="")
    lg.add_argument("--pg-url", required=True)
    lg.add_argument("--concurrency", type=int, default=64)
    lg.add_argument("--connections", type=int, default=4)
    lg.add_argument("--warmup", type=float, default=2.0)
    lg.add_argument("--duration", type=float, default=5.0)
    st = sub.add_parser("storage")
    st.add_argument("--url", required=True)
    st.add_argument("--concurrency", type=int, default=64)
    st.add_argument("--warmup", type=float, default=1.0)
    st.add_argument("--duration", type=float, default=4.0)
    st.add_argument("--start-at", type=float, default=0.0)
    ap.add_argument("--quick", action="store_true", help="one round, c=64 only, short windows")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--storage-concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--storage-rounds", type=int, default=3)
    ap.add_argument("--only", choices=["unary", "storage"], help="run one part only")
    ap.add_argument(
        "--sqlite-processes", type=int, nargs="+", default=[1, 2],
        help="the SQLite configurations: one dealer with `serve --processes N` for each N (default 1 2)",
    )  # fmt: skip
    ap.add_argument("--connections", type=int, default=4, help="TCP connections of the load, in all")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    opts = ap.parse_args()
    if opts.mode == "load":
        print(json.dumps(asyncio.run(load(opts))))
        return 0
    if opts.mode == "storage":
        print(json.dumps(asyncio.run(storage_load(opts))))
        return 0
    if opts.quick:
        opts.rounds, opts.concurrency, opts.warmup, opts.duration = 1, [64], 1.0, 3.0
        opts.storage_concurrency, opts.storage_rounds = [1, 64], 1

    from fairdeck_server.log_signing import load_or_create_signer
    from fairdeck_server.vault import load_or_create_key
    from tests.support.pgcluster import PgCluster

    started = time.time()
    with (
        tempfile.TemporaryDirectory(prefix="fairdeck-replica-bench-") as tmp_s,
        PgCluster(fsync=True, settings={"track_wal_io_timing": "on"}) as pg,
    ):
        tmp = Path(tmp_s)
        keys = (tmp / "seed.key", tmp / "log.key")
        load_or_create_key(keys[0], environ={})
        load_or_create_signer(keys[1], "fairdeck.bench/replicas")
        assert pg.dir is not None
        datadir = pg.dir / "data"
        db_one, db_two = pg.create_database("one"), pg.create_database("two")
        dealers: list[Dealer] = []
        rows: list[dict[str, Any]] = []
        sizes: dict[str, Any] = {}
        storage: list[dict[str, Any]] = []
        if opts.only != "storage":
            try:
                dealers.append(start_dealer("pg-1", tmp, db_one, keys))
                dealers.append(start_dealer("pg-2a", tmp, db_two, keys))
                dealers.append(start_dealer("pg-2b", tmp, db_two, keys))
                configs = {"pg-1": dealers[:1], "pg-2": dealers[1:3]}
                for n in opts.sqlite_processes:
                    dealers.append(start_dealer(f"sqlite-{n}", tmp, None, keys, processes=n))
                    configs[f"sqlite-{n}"] = dealers[-1:]
                rows = summarize(run_configs(configs, datadir, pg.url(), opts))
                sizes = table_sizes(db_one)
            finally:
                for d in dealers:
                    d.stop()
        serial: list[dict[str, float]] = []
        if opts.only != "unary":
            storage = run_storage(pg.create_database, datadir, pg.url(), opts)
            serial = serial_section(pg.create_database(), opts.storage_concurrency)
    line = fit(serial)
    report = {
        "date": datetime.date.today().isoformat(),
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "options": {k: v for k, v in vars(opts).items() if k != "mode"},
        "seconds": time.time() - started,
        "unary": rows,
        "storage": storage,
        "serial_section": serial,
        "lock_fit": line,
        "disk": sizes,
    }
    print_report(report)
    if opts.json:
        Path(opts.json).write_text(json.dumps(report, indent=2))
    return 0


def print_report(report: dict[str, Any]) -> None:
    print(f"replica_bench {report['date']} git {report['git']}, {report['machine']['cpus']} CPUs")
    print("\nDealNewHand, same load (median of rounds):")
    print(f"{'c':>4} {'config':<7} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'dealer us':>9} {'pg us':>6} "
          f"{'client us':>9} {'WAL B':>6} {'syncs/s':>7} {'sync ms':>7} {'other cpu':>9}")  # fmt: skip
    for row in report["unary"]:
        for name in row["configs"]:
            r = row[name]
            print(
                f"{row['concurrency']:>4} {name:<7} {r['calls_per_s']:>8.0f} "
                f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} "
                f"{r['dealer_cpu_us_per_call']:>9.0f} {r['pg_cpu_us_per_call']:>6.0f} "
                f"{r['client_cpu_us_per_call']:>9.0f} {r['wal_bytes_per_call'] or 0:>6.0f} "
                f"{r['wal_syncs_per_s'] or 0:>7.0f} {r['wal_sync_ms'] or 0:>7.2f} {r['other_cpu_util']:>9.0%}"
            )
        for key, ratio in row.items():
            if "/" in key:
                print(
                    f"     {key} throughput: {ratio['median']:.2f}x [{ratio['min']:.2f}..{ratio['max']:.2f}]"
                )
        for name in row["configs"]:
            r = row[name]
            if r["quiet_rounds"]:
                print(
                    f"     quiet rounds only ({r['quiet_rounds']}), {name}: "
                    f"{r['quiet_calls_per_s']:.0f} calls/s, "
                    f"p50 {r['quiet_p50_ms']:.2f} ms, p99 {r['quiet_p99_ms']:.2f} ms, "
                    f"dealer {r['quiet_dealer_cpu_us_per_call']:.0f} us/call, "
                    f"pg {r['quiet_pg_cpu_us_per_call']:.0f} us/call"
                )
    print("\nPostgresStorage.create_hands alone (one DealNewHand-sized hand per call):")
    for s in report["storage"]:
        print(
            f"  x{s['processes']} c={s['concurrency_each']:<3} {s['calls_per_s']:7.0f} calls/s  "
            f"p50 {s['p50_ms']:6.2f} ms  p99 {s['p99_ms']:6.2f} ms  "
            f"{s['appends_per_batch']:6.1f} appends/batch, {s['batches_per_s']:.0f} batches/s; per batch: "
            f"lock wait {s['lock_wait_ms_per_batch']:.2f} ms, hashing {s['hashing_ms_per_batch']:.2f} ms, "
            f"transaction {s['transaction_ms_per_batch']:.2f} ms  "
            f"cpu: process {s['process_cpu_us_per_call']:.0f}, "
            f"pg {s['pg_cpu_us_per_call']:.0f} us/call  WAL {s['wal_bytes_per_call']:.0f} B/call, "
            f"{s['wal_syncs_per_s']:.0f} syncs/s of {s['wal_sync_ms'] or 0:.2f} ms  "
            f"other cpu {s['other_cpu_util']:.0%}"
        )
    if report["serial_section"]:
        print("\nThe serial section: the write statement's server-side execution (EXPLAIN ANALYZE):")
        for x in report["serial_section"]:
            print(
                f"  {x['appends']:>4} appends: {x['execution_ms']:.3f} ms "
                f"({x['execution_ms'] / x['appends'] * 1e3:.1f} us per append), "
                f"planning {x['planning_ms']:.3f} ms (outside the lock; prepared statements skip it)"
            )
    if report["lock_fit"]:
        f = report["lock_fit"]
        print(
            f"  execution ~ {f['fixed_ms']:.2f} ms + {f['per_append_ms'] * 1e3:.1f} us per append; "
            "the log lock is held for that plus the WAL flush at COMMIT"
        )
    disk = report["disk"]
    if not disk:
        return
    print(
        f"\nOn disk (pg-1 database, {disk['hands']:,} hands, {disk['entries']:,} entries): "
        f"{disk['hand_bytes_per_hand']:.0f} B per hand (table + indexes), "
        f"{disk['log_bytes_per_entry']:.0f} B per log entry (entries + stored hashes)"
    )


if __name__ == "__main__":
    sys.exit(main())
