"""Server CPU per DealNewHand against a do-nothing grpc.aio service as the database grows: with 0,
100,000 and 1,000,000 hands already in it, side by side in one run.

1. Starts the real dealer (SQLite, limits off) on a fresh data dir and bench/trivial_server.py
   (one captured real response, nothing else).
2. For each size: fills the database up to that many hands with DealHands(100,000, close=true)
   (each hand is a row and two log entries), then measures, ``--rounds`` times alternating, the
   load generator at ``--concurrency`` (16) against the trivial service and against the dealer,
   twice: without a request id (as deal_bench sends) and with one per call (as the SDK sends
   every open: an idempotency key the dealer must look up).
3. Reports server CPU per call and the ratio, with the load average and other processes' CPU.

    .venv/bin/python bench/growth_bench.py --json bench/results/growth.json          # ~15 minutes
    .venv/bin/python bench/growth_bench.py --sizes 0,20000 --rounds 1 --duration 3   # smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bulk_bench import start  # noqa: E402
from deal_bench import _git_state  # noqa: E402
from server_process import Server, loadgen  # noqa: E402


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def fill(dealer: Server, have: int, want: int) -> int:
    while have < want:
        n = min(100_000, want - have)
        b = loadgen(["batch", "--count", str(n), "--close"], dealer)
        assert b["hands"] == n, b
        have += n
    return have


def measure(server: Server, opts: argparse.Namespace, request_ids: bool) -> dict[str, Any]:
    load = _load()
    args = [
        "unary",
        "--concurrency",
        str(opts.concurrency),
        "--warmup",
        "3",
        "--duration",
        str(opts.duration),
    ]
    r = loadgen([*args, *(["--request-ids"] if request_ids else [])], server)
    return {
        "cpu_us_per_call": r["server_cpu_us_per_call"],
        "calls_per_s": r["calls_per_s"],
        "p99_ms": r["p99_ms"],
        "other_cpu": r.get("other_cpu_util"),
        "load": (load, _load()),
    }


def _progress(msg: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0,100000,1000000", help="hands in the database (0,100000,1000000)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args(argv)
    sizes = [int(x) for x in opts.sizes.split(",")]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fairdeck-growth-") as tmp:
        dealer, trivial = start(Path(tmp))
        db = Path(tmp) / "data" / "fairdeck.db"
        have = 0
        try:
            for size in sizes:
                have = fill(dealer, have, size)
                for ids in (False, True):
                    rounds = []
                    for _ in range(opts.rounds):
                        rounds.append(
                            {"trivial": measure(trivial, opts, ids), "dealer": measure(dealer, opts, ids)}
                        )
                    d = statistics.median(r["dealer"]["cpu_us_per_call"] for r in rounds)
                    t = statistics.median(r["trivial"]["cpu_us_per_call"] for r in rounds)
                    ratios = [
                        r["dealer"]["cpu_us_per_call"] / r["trivial"]["cpu_us_per_call"] for r in rounds
                    ]
                    row = {
                        "hands_before": size,
                        "request_ids": ids,
                        "dealer_us": d,
                        "trivial_us": t,
                        "ratio": statistics.median(ratios),
                        "ratio_range": (min(ratios), max(ratios)),
                        "db_mb": round(db.stat().st_size / 2**20),
                        "rounds": rounds,
                    }
                    results.append(row)
                    _progress(
                        f"{size:>9,} hands, request ids {'yes' if ids else 'no '}: {d:.0f} vs {t:.0f} us = "
                        f"{row['ratio']:.2f}x, db {row['db_mb']} MB, load {_load():.1f}"
                    )
        finally:
            dealer.stop()
            trivial.stop()
    print(
        f"growth_bench  git {_git_state()}  c={opts.concurrency}, {opts.rounds} rounds of {opts.duration:g} s"
    )
    head = f"{'hands in db':>12} {'request id':>10} {'dealer us':>9} {'trivial us':>10} {'ratio':>6}"
    print(head + "  range       db MB")
    for r in results:
        lo, hi = r["ratio_range"]
        print(
            f"{r['hands_before']:>12,} {'yes' if r['request_ids'] else 'no':>10} {r['dealer_us']:>9.0f} "
            f"{r['trivial_us']:>10.0f} {r['ratio']:>6.2f}  [{lo:.2f}..{hi:.2f}]  {r['db_mb']:>5}"
        )
    if opts.json:
        opts.json.write_text(json.dumps({"git": _git_state(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
