"""The load generator of replica_bench.py, run as its own process (``replica_bench.py
load``): C DealNewHand calls in flight, round-robin over a configuration's replicas, with the
CPU of the dealers, of PostgreSQL and of itself and the WAL written read at the start and
end of the measured window; one JSON result on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import grpc
from loadgen import METHOD, OPTIONS, machine_cpu, percentile, proc_cpu
from replica_measure import cpu_of, cpu_used, pg_pids, wal_per_call, wal_snapshot

from fairdeck.v1 import dealer_pb2 as pb


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
