"""Deal-path benchmark: the real dealer against a do-nothing gRPC service.

One run, one machine, one load generator (bench/loadgen.py, its own process):

1. Starts the real dealer (``python -m fairdeck.cli serve --listen 127.0.0.1:0
   --data TMP``; SQLite WAL, synchronous=FULL, group commit) and captures one
   real DealNewHandResponse from it.
2. Starts bench/trivial_server.py, which answers DealNewHand with that
   captured response (same bytes on the wire) and does nothing else.
3. For each round and each concurrency (1, 16, 64 by default) runs the load
   generator against the dealer and against the trivial service, in
   alternating order, and reports the median of the rounds, and the median
   and min of the per-round dealer/trivial ratios.
   The bar (bench/README.md, "the gRPC Deal path"): the dealer's server CPU per call at most 1.4x the
   trivial service's at c=16 and c=64.
3b. Open loop (bar 2): half the trivial service's measured capacity is
   offered to each server in turn on a fixed schedule (loadgen.py open);
   the dealer's p99 must be at most 1.5x the trivial service's.
4. DealHands (server streaming) on a fresh dealer: 100,000 hands per call,
   close=False and close=True, through the generated stub. Afterwards the
   dealer is stopped and the database is opened to check that every hand and
   every log entry is there. The bar: close=False at least 20,000 decks/s at
   at most 50 us of server CPU per deck (close=True reported beside it).
5. Optionally (``--profile DIR``) samples the dealer with py-spy during an
   extra concurrency-64 run and a DealHands call, and prints the hottest
   functions.

The load generator shares the machine's cores with the server it drives,
and its CPU use is reported next to the server's.

    .venv/bin/python bench/deal_bench.py                 # ~7 minutes
    .venv/bin/python bench/deal_bench.py --quick         # smoke run, ~20 s
    .venv/bin/python bench/deal_bench.py --profile bench/profiles
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
from deal_profile import profile
from deal_report import print_report
from deal_runs import run_batch, run_open, run_unary, start_dealer, summarize_unary
from server_process import HERE, PYTHON, Server, loadgen

from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc


def capture_response(target: str, path: Path) -> int:
    """One real DealNewHandResponse from the dealer, saved for the trivial server."""
    with grpc.insecure_channel(target) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        response = stub.DealNewHand(pb.DealNewHandRequest(deck="standard"), timeout=10)
    assert len(response.cards) == 52 and len(response.hand.commitment) == 32
    data = response.SerializeToString()
    path.write_bytes(data)
    return len(data)


def _git_state() -> str:
    """HEAD and whether the server/client code differs from it (the code under test)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "server", "client"],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in server/ or client/" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="dealer/trivial alternations per concurrency (3)")
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 16, 64])
    ap.add_argument("--channels", type=int, default=1, help="channels the load generator spreads calls over")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per point (2)")
    ap.add_argument("--duration", type=float, default=6.0, help="measured seconds per point (6)")
    ap.add_argument("--batch-count", type=int, default=100_000, help="hands per DealHands call (100000)")
    ap.add_argument("--batch-reps", type=int, default=2, help="DealHands calls per close mode (2)")
    ap.add_argument(
        "--batch-parallel", type=int, default=2, help="also run this many calls at once (2; 1=off)"
    )
    ap.add_argument("--profile", type=Path, metavar="DIR", help="also py-spy the dealer; profiles go here")
    ap.add_argument("--skip-unary", action="store_true", help="neither closed- nor open-loop DealNewHand")
    ap.add_argument("--skip-open", action="store_true", help="no open-loop latency bar")
    ap.add_argument(
        "--open-capacity",
        type=float,
        help="calls/s taken as the trivial service's capacity (default: measured)",
    )
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 1 round of 1 s points, 20,000-hand batches"
    )
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write all results as JSON")
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.rounds, opts.warmup, opts.duration = 1, 0.5, 1.0
        opts.batch_count, opts.batch_reps, opts.batch_parallel = 20_000, 1, 1

    result: dict[str, Any] = {
        "benchmark": "deal_bench",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "cpus": os.cpu_count(),
        "git": _git_state(),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
    }
    with tempfile.TemporaryDirectory(prefix="fairdeck-bench-") as tmp:
        tmpdir = Path(tmp)
        if not opts.skip_unary:
            dealer = start_dealer(tmpdir / "unary")
            trivial = None
            try:
                response = tmpdir / "response.bin"
                result["response_bytes"] = capture_response(dealer.target, response)
                trivial = Server(
                    "trivial",
                    [
                        PYTHON,
                        str(HERE / "trivial_server.py"),
                        "--listen",
                        "127.0.0.1:0",
                        "--response",
                        str(response),
                    ],
                    tmpdir / "trivial.log",
                )
                if opts.concurrency:
                    raw = run_unary(dealer, trivial, opts)
                    result["unary_raw"] = {str(c): v for c, v in raw.items()}
                    result["unary"] = summarize_unary(raw)
                if not opts.skip_open:
                    # Capacity: the trivial service's closed-loop throughput at c=64 (measured
                    # above, or now), the most this machine serves with the generator beside it.
                    top = max(opts.concurrency or [64])
                    if "unary_raw" in result and str(top) in result["unary_raw"]:
                        capacity = statistics.median(
                            x["calls_per_s"] for x in result["unary_raw"][str(top)]["trivial"]
                        )
                    else:
                        args = ["unary", "--concurrency", "64", "--warmup", str(opts.warmup)]
                        capacity = loadgen([*args, "--duration", str(opts.duration)], trivial)["calls_per_s"]
                    result["open"] = run_open(dealer, trivial, opts.open_capacity or capacity, opts)
                if opts.profile:
                    result["profile"] = profile(dealer, opts.profile, opts)
            finally:
                if trivial is not None:
                    trivial.stop()
                dealer.stop()
        if not opts.skip_batch:
            result["batch"] = run_batch(tmpdir / "batch", opts)
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=2))
    print_report(result)
    bars = [r["pass_cpu"] for r in result.get("unary", []) if "pass_cpu" in r]
    bars += [result["open"]["pass"]] if "open" in result else []
    bars += [result["batch"]["close=False"]["pass"]] if "batch" in result else []
    return 0 if all(bars) else 1


if __name__ == "__main__":
    sys.exit(main())
