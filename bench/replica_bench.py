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
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # tests.support.pgcluster, shared with the test suite

from replica_load import load  # noqa: E402
from replica_measure import progress, table_sizes  # noqa: E402
from replica_report import print_report, summarize  # noqa: E402
from replica_storage import fit, run_storage, serial_section, storage_load  # noqa: E402
from server_process import PYTHON, Server  # noqa: E402

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


# -- the run --------------------------------------------------------------------------------------------


def _sub(mode: str, *args: str) -> dict[str, Any]:
    argv = [PYTHON, str(Path(__file__).resolve()), mode, *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


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
                progress(
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

    from fairdeck_server.dealing.vault import load_or_create_key
    from fairdeck_server.publishing.log_signing import load_or_create_signer
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


if __name__ == "__main__":
    sys.exit(main())
