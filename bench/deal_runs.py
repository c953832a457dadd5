"""The measured parts of deal_bench.py and their bars: DealNewHand closed loop at each
concurrency and open loop at half the trivial service's capacity (dealer and trivial
service alternating), and DealHands on a fresh dealer, after which the database is opened
to check that every hand and log entry is there. Each returns what it measured and whether
its bar passed; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from server_process import Server, loadgen, serve_argv

BAR_CPU = 1.4
"""Bar 1 of the lean Deal path (bench/README.md, "the gRPC Deal path"): dealer server CPU per
DealNewHand call <= 1.4x the trivial service's."""
BAR_OPEN_P99 = 1.5
"""Bar 2: at half the trivial service's capacity, offered open loop, dealer p99 <= 1.5x trivial's."""
OPEN_LOAD = 0.5
BAR_BATCH = 20_000
"""Bar 3: DealHands close=False >= 20,000 decks/s ..."""
BAR_BATCH_CPU_US = 50.0
"""... at <= 50 us of server CPU per deck."""
BAR_CONCURRENCY = (16, 64)
INFO_THROUGHPUT = 0.85
INFO_P99 = 1.5
"""The closed-loop throughput and p99 ratios of the earlier multi-replica bars, reported for reference."""


def start_dealer(data: Path) -> Server:
    return Server("dealer", serve_argv(data), data.with_suffix(".log"))


def run_unary(
    dealer: Server, trivial: Server, opts: argparse.Namespace
) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """{concurrency: {server name: [result per round]}}; dealer and trivial alternate."""
    results: dict[int, dict[str, list[dict[str, Any]]]] = {
        c: {"dealer": [], "trivial": []} for c in opts.concurrency
    }
    flip = False
    for r in range(opts.rounds):
        for c in opts.concurrency:
            pair = [dealer, trivial] if not flip else [trivial, dealer]
            flip = not flip
            for server in pair:
                res = loadgen(
                    [
                        "unary",
                        "--concurrency",
                        str(c),
                        "--channels",
                        str(opts.channels),
                        "--warmup",
                        str(opts.warmup),
                        "--duration",
                        str(opts.duration),
                    ],
                    server,
                )
                results[c][server.name].append(res)
                _progress(
                    f"round {r + 1} c={c:<3} {server.name:<8} {res['calls_per_s']:8.0f} calls/s  "
                    f"p50 {res['p50_ms']:6.2f} ms  p99 {res['p99_ms']:6.2f} ms  "
                    f"server cpu {res.get('server_cpu_util', 0):.0%}  "
                    f"client cpu {res['client_cpu_util']:.0%}  "
                    f"other cpu {res.get('other_cpu_util', 0):.0%}"
                )
    return results


def _ratio(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize_unary(results: dict[int, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    rows = []
    for c, by in results.items():
        d, t = by["dealer"], by["trivial"]
        tput = [a["calls_per_s"] / b["calls_per_s"] for a, b in zip(d, t, strict=True)]
        p99 = [a["p99_ms"] / b["p99_ms"] for a, b in zip(d, t, strict=True)]
        cpu = [a["server_cpu_us_per_call"] / b["server_cpu_us_per_call"] for a, b in zip(d, t, strict=True)]
        row: dict[str, Any] = {"concurrency": c}
        for name, rs in by.items():
            row[name] = {
                key: statistics.median(x[key] for x in rs)
                for key in (
                    "calls_per_s",
                    "p50_ms",
                    "p99_ms",
                    "server_cpu_util",
                    "client_cpu_util",
                    "server_cpu_us_per_call",
                    "other_cpu_util",
                )
            }
            row[name]["calls_per_s_all"] = [x["calls_per_s"] for x in rs]
            row[name]["errors"] = sum(sum(x["errors"].values()) for x in rs)
        row["throughput_ratio"] = _ratio(tput)
        row["p99_ratio"] = _ratio(p99)
        row["cpu_ratio"] = _ratio(cpu)
        if c in BAR_CONCURRENCY:
            row["pass_cpu"] = row["cpu_ratio"]["median"] <= BAR_CPU
        rows.append(row)
    return rows


def run_open(dealer: Server, trivial: Server, capacity: float, opts: argparse.Namespace) -> dict[str, Any]:
    """Bar 2: both servers at the same fixed offered load (open loop), alternating."""
    rate = OPEN_LOAD * capacity
    runs: dict[str, list[dict[str, Any]]] = {"dealer": [], "trivial": []}
    for r in range(opts.rounds):
        for server in [dealer, trivial] if r % 2 == 0 else [trivial, dealer]:
            args = [
                "open",
                "--rate",
                f"{rate:.1f}",
                "--warmup",
                str(opts.warmup),
                "--duration",
                str(opts.duration),
            ]
            res = loadgen(args, server)
            runs[server.name].append(res)
            _progress(
                f"open loop round {r + 1} {server.name:<8} {rate:6.0f}/s offered  "
                f"{res['calls_per_s']:6.0f}/s done  "
                f"p50 {res['p50_ms']:6.2f}  p99 {res['p99_ms']:6.2f}  p99.9 {res['p999_ms']:6.2f} ms  "
                f"server cpu {res.get('server_cpu_us_per_call', 0):.0f} us/call  "
                f"send late p99 {res['send_late_p99_ms']:.2f} ms  "
                f"other cpu {res.get('other_cpu_util', 0):.0%}"
            )
    out: dict[str, Any] = {"capacity": capacity, "rate": rate, "runs": runs}
    for name, rs in runs.items():
        out[name] = {
            key: statistics.median(x[key] for x in rs)
            for key in (
                "calls_per_s",
                "p50_ms",
                "p99_ms",
                "p999_ms",
                "server_cpu_us_per_call",
                "other_cpu_util",
            )
        }
        out[name]["errors"] = sum(sum(x["errors"].values()) for x in rs)
    d, t = runs["dealer"], runs["trivial"]
    out["p99_ratio"] = _ratio([a["p99_ms"] / b["p99_ms"] for a, b in zip(d, t, strict=True)])
    out["p50_ratio"] = _ratio([a["p50_ms"] / b["p50_ms"] for a, b in zip(d, t, strict=True)])
    out["p999_ratio"] = _ratio([a["p999_ms"] / b["p999_ms"] for a, b in zip(d, t, strict=True)])
    out["pass"] = out["p99_ratio"]["median"] <= BAR_OPEN_P99 and out["dealer"]["errors"] == 0
    return out


def run_batch(data: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """DealHands on a fresh dealer; then check the database holds every hand."""
    dealer = start_dealer(data)
    runs: list[dict[str, Any]] = []
    try:
        loadgen(["batch", "--count", "2000"], dealer)  # warm-up
        warm = 2000
        for rep in range(opts.batch_reps):
            for close in (False, True) if rep % 2 == 0 else (True, False):
                args = ["batch", "--count", str(opts.batch_count)] + (["--close"] if close else [])
                res = loadgen(args, dealer)
                runs.append(res)
                _progress(
                    f"DealHands rep {rep + 1} close={close!s:<5} {res['hands']} hands "
                    f"in {res['seconds']:.2f} s = {res['decks_per_s']:8.0f} decks/s  "
                    f"server cpu {res['server_cpu_us_per_deck']:.0f} us/deck  "
                    f"other cpu {res['other_cpu_util']:.0%}"
                )
        if opts.batch_parallel > 1:
            for close in (False, True):
                args = ["batch", "--count", str(opts.batch_count), "--parallel", str(opts.batch_parallel)]
                res = loadgen(args + (["--close"] if close else []), dealer)
                runs.append(res)
                _progress(
                    f"DealHands {opts.batch_parallel} parallel calls close={close!s:<5} "
                    f"{res['hands']} hands: "
                    f"{res['decks_per_s']:8.0f} decks/s"
                )
    finally:
        rc = dealer.stop()
    expected = warm + sum(r["hands"] for r in runs)
    expected_log = warm + sum(r["hands"] * (2 if r["close"] else 1) for r in runs)
    with sqlite3.connect(data / "fairdeck.db") as conn:
        hands = conn.execute("SELECT COUNT(*) FROM hands").fetchone()[0]
        log = conn.execute("SELECT COUNT(*) FROM log_entries").fetchone()[0]
        sync = conn.execute("PRAGMA journal_mode").fetchone()[0]
    summary: dict[str, Any] = {"runs": runs, "dealer_exit": rc}
    for close in (False, True):
        single = [r for r in runs if r["close"] == close and r["parallel_calls"] == 1]
        summary[f"close={close}"] = {
            "decks_per_s_median": statistics.median(r["decks_per_s"] for r in single),
            "decks_per_s_min": min(r["decks_per_s"] for r in single),
            "decks_per_s_max": max(r["decks_per_s"] for r in single),
            "server_cpu_us_per_deck": statistics.median(r["server_cpu_us_per_deck"] for r in single),
        }
        summary[f"close={close}"]["pass"] = (
            summary[f"close={close}"]["decks_per_s_median"] >= BAR_BATCH
            and summary[f"close={close}"]["server_cpu_us_per_deck"] <= BAR_BATCH_CPU_US
        )
    summary["durability_check"] = {
        "hands_in_db": hands,
        "hands_expected": expected,
        "log_entries_in_db": log,
        "log_entries_expected": expected_log,
        "journal_mode": sync,
        "ok": hands == expected and log == expected_log and all(r["sample_ok"] for r in runs),
    }
    return summary


def _progress(msg: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)
