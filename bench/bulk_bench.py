"""Bulk dealing against a do-nothing call: server CPU per DealHands deck over a do-nothing grpc.aio
service's server CPU per DealNewHand call, side by side in one run, and decks/s.

1. Starts the real dealer (``fairdeck serve``, SQLite, limits off: 100,000 open hands are more
   than a tenant's default cap) and bench/trivial_server.py, which answers DealNewHand with one
   real response captured from the dealer and does nothing else.
2. Each round, in turn: the trivial service under the load generator at ``--concurrency`` (16)
   for ``--duration`` seconds (its server CPU per call); one DealHands(``--hands``, close=false)
   read to the end (the dealer's server CPU per deck, every thread, and decks/s); the same with
   close=true. The ratio is CPU per deck over the trivial CPU per call of the same round.
3. Reports the median and the spread of the rounds, the load average at each step, and the
   CPU other processes used. The bar: close=false at most 0.15x.

    .venv/bin/python bench/bulk_bench.py --rounds 3 --json bench/results/bulk.json
    .venv/bin/python bench/bulk_bench.py --rounds 1 --hands 20000 --duration 3      # smoke run
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

from deal_bench import _git_state, capture_response  # noqa: E402
from server_process import PYTHON, Server, loadgen, serve_argv  # noqa: E402

BAR = 0.15


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def start(tmp: Path) -> tuple[Server, Server]:
    data = tmp / "data"
    argv = serve_argv(data)
    dealer = Server("dealer", argv, tmp / "dealer.log")
    response = tmp / "response.bin"
    capture_response(dealer.target, response)
    trivial = Server(
        "trivial",
        [PYTHON, str(HERE / "trivial_server.py"), "--listen", "127.0.0.1:0", "--response", str(response)],
        tmp / "trivial.log",
    )
    return dealer, trivial


def one_round(dealer: Server, trivial: Server, opts: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    load = _load()
    t = loadgen(
        ["unary", "--concurrency", str(opts.concurrency), "--warmup", "2", "--duration", str(opts.duration)],
        trivial,
    )
    out["trivial"] = {
        "cpu_us_per_call": t["server_cpu_us_per_call"],
        "calls_per_s": t["calls_per_s"],
        "other_cpu": t.get("other_cpu_util"),
        "load": (load, _load()),
    }
    for close in (False, True):
        load = _load()
        b = loadgen(["batch", "--count", str(opts.hands), *(["--close"] if close else [])], dealer)
        assert b["hands"] == opts.hands and b["sample_ok"], b
        key = "close" if close else "open"
        out[key] = {
            "cpu_us_per_deck": b["server_cpu_us_per_deck"],
            "decks_per_s": b["decks_per_s"],
            "ratio": b["server_cpu_us_per_deck"] / out["trivial"]["cpu_us_per_call"],
            "other_cpu": b.get("other_cpu_util"),
            "load": (load, _load()),
        }
        print(
            f"  {time.strftime('%H:%M:%S')} close={close}: {b['server_cpu_us_per_deck']:.1f} us/deck vs "
            f"{t['server_cpu_us_per_call']:.0f} us/call = {out[key]['ratio']:.3f}x, "
            f"{b['decks_per_s']:.0f} decks/s, other cpu {b.get('other_cpu_util', 0):.0%}, load {load:.1f}",
            file=sys.stderr,
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hands", type=int, default=100_000, help="hands per DealHands call (100000)")
    ap.add_argument("--concurrency", type=int, default=16, help="of the trivial service's load (16)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of the trivial service's window")
    ap.add_argument("--json", type=Path)
    opts = ap.parse_args(argv)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="fairdeck-bulk-") as tmp:
        dealer, trivial = start(Path(tmp))
        try:
            for _ in range(opts.rounds):
                rounds.append(one_round(dealer, trivial, opts))
        finally:
            dealer.stop()
            trivial.stop()
    summary = {}
    for key in ("open", "close"):
        ratios = [r[key]["ratio"] for r in rounds]
        summary[key] = {
            "ratio_median": statistics.median(ratios),
            "ratio_range": (min(ratios), max(ratios)),
            "cpu_us_per_deck_median": statistics.median(r[key]["cpu_us_per_deck"] for r in rounds),
            "decks_per_s_median": statistics.median(r[key]["decks_per_s"] for r in rounds),
            "decks_per_s_range": (
                min(r[key]["decks_per_s"] for r in rounds),
                max(r[key]["decks_per_s"] for r in rounds),
            ),
        }
    trivial_cpu = statistics.median(r["trivial"]["cpu_us_per_call"] for r in rounds)
    print(f"bulk_bench  git {_git_state()}  {opts.rounds} rounds, {opts.hands:,} hands per DealHands call")
    print(f"do-nothing grpc.aio DealNewHand: {trivial_cpu:.0f} us server CPU per call, c={opts.concurrency}")
    for key, label in (("open", "close=false"), ("close", "close=true")):
        s = summary[key]
        verdict = ("PASS" if s["ratio_median"] <= BAR else "MISS") if key == "open" else "info"
        print(
            f"{verdict:4}  DealHands {label}: {s['cpu_us_per_deck_median']:.1f} us per deck, "
            f"{s['ratio_median']:.3f}x [{s['ratio_range'][0]:.3f}..{s['ratio_range'][1]:.3f}] "
            f"(bar <= {BAR}x), "
            f"{s['decks_per_s_median']:,.0f} decks/s "
            f"[{s['decks_per_s_range'][0]:,.0f}..{s['decks_per_s_range'][1]:,.0f}]"
        )
    if opts.json:
        opts.json.write_text(
            json.dumps({"git": _git_state(), "rounds": rounds, "summary": summary}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
