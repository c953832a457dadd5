"""The Deal path of two versions of the dealer, side by side: this tree against a baseline.

    git archive BASE server client | tar -x -C /tmp/base
    .venv/bin/python bench/deal_ab.py --baseline /tmp/base --rounds 4

    .venv/bin/python bench/deal_ab.py --baseline . --new-flags="--tiles {data}.tiles"   # one flag's cost

Both dealers run as ``python -m fairdeck.cli serve`` subprocesses (the baseline with
``PYTHONPATH=BASE/server:BASE/client``, so its server code is the one imported) with the
limits off as in deal_bench.py, on fresh data dirs. For each round and concurrency
(closed loop, bench/loadgen.py) and for DealHands, the two alternate, the first flipping
every time, so machine noise falls on both. Reported: the medians, and the median and
range of the per-round new/baseline ratios of throughput and of server CPU per call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server_process import Server, loadgen, serve_argv


def start(name: str, data: Path, pythonpath: str | None, flags: Sequence[str] = ()) -> Server:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    argv = serve_argv(data, *(flag.replace("{data}", str(data)) for flag in flags))
    return Server(name, argv, data.with_suffix(".log"), env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--baseline", type=Path, required=True, help="a tree holding the baseline's server/ and client/"
    )
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[16, 64])
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--batch-count", type=int, default=50_000, help="hands per DealHands call; 0: none")
    ap.add_argument(
        "--new-flags", default="", help="more serve flags for the new side ({data}: its data dir)"
    )
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args()
    base = opts.baseline.resolve()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="fairdeck-ab-") as tmp:
        new = start("new", Path(tmp) / "new", None, opts.new_flags.split())
        old = start("baseline", Path(tmp) / "old", f"{base / 'server'}:{base / 'client'}")
        try:
            flip = False
            for r in range(opts.rounds):
                points = [(f"c={c}", ["unary", "--concurrency", str(c)]) for c in opts.concurrency]
                if opts.batch_count:
                    points.append(("DealHands", ["batch", "--count", str(opts.batch_count)]))
                for point, args in points:
                    if args[0] == "unary":
                        args = [*args, "--warmup", str(opts.warmup), "--duration", str(opts.duration)]
                    for server in (old, new) if flip else (new, old):
                        res = loadgen(args, server)
                        runs.setdefault(point, {}).setdefault(server.name, []).append(res)
                        rate = res.get("calls_per_s") or res.get("decks_per_s")
                        cpu = res.get("server_cpu_us_per_call") or res.get("server_cpu_us_per_deck")
                        print(
                            f"round {r + 1} {point:<9} {server.name:<8} {rate:8.0f}/s  "
                            f"server cpu {cpu:6.0f} us  "
                            f"other cpu {res.get('other_cpu_util', 0):.0%}",
                            file=sys.stderr,
                            flush=True,
                        )
                    flip = not flip
        finally:
            new.stop()
            old.stop()
    print(
        f"new: this tree {opts.new_flags}; baseline: {base}; {opts.rounds} rounds, alternating; "
        "medians, ratio new/baseline"
    )
    summary = {}
    for point, by in runs.items():
        key = "calls_per_s" if point.startswith("c=") else "decks_per_s"
        cpu = "server_cpu_us_per_call" if point.startswith("c=") else "server_cpu_us_per_deck"
        rate = [a[key] / b[key] for a, b in zip(by["new"], by["baseline"], strict=True)]
        cost = [a[cpu] / b[cpu] for a, b in zip(by["new"], by["baseline"], strict=True)]
        summary[point] = {"rate_ratio": rate, "cpu_ratio": cost}
        print(
            f"  {point:<9} throughput {statistics.median(x[key] for x in by['new']):7.0f} vs "
            f"{statistics.median(x[key] for x in by['baseline']):7.0f}/s = {statistics.median(rate):.2f}x "
            f"[{min(rate):.2f}..{max(rate):.2f}]   "
            f"server CPU {statistics.median(x[cpu] for x in by['new']):5.0f} vs "
            f"{statistics.median(x[cpu] for x in by['baseline']):5.0f} us = {statistics.median(cost):.2f}x "
            f"[{min(cost):.2f}..{max(cost):.2f}]"
        )
    if opts.json:
        opts.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
