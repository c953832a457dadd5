"""Floods of the methods open to all, with no credentials, against one ``fairdeck serve``.

``reflection``: a victim calls DealNewHand back to back (one call at a time) for ``--seconds``
alone, then as long again while ``--streams`` reflection streams over ``--connections``
connections each ask again as soon as answered; during the flood a grpcurl-style session (one
new connection, one stream, 10 questions in turn) and health Checks run. Prints the victim's
p50/p99 in both windows and their ratio, its failed calls, the session's seconds, the slowest
Check, and the dealer's CPU per second of the flood.

``watch``: ``--streams`` health Watch streams over ``--connections`` connections for ``--seconds``,
then all cancelled at once; the dealer's RSS before, at its highest while they are open, at its
highest while they end, and 15 s after (three heap trims).

    .venv/bin/python bench/open_floods.py reflection --streams 1500 --connections 16 --seconds 20
    .venv/bin/python bench/open_floods.py watch --streams 20000 --connections 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fairdeck.client import DealerClient  # noqa: E402
from fairdeck.client.exceptions import FairdeckError  # noqa: E402
from tests.support.dealers import DealerProcess  # noqa: E402
from tests.support.floods import check_latency, grpcurl_session, reflection_flood, watch_flood  # noqa: E402

SERVE = ("--max-open-hands", "0")
"""DealNewHand leaves its hand open: the victim's 10,000th call would meet the open-hands cap."""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def victim(target: str, seconds: float) -> dict[str, Any]:
    """DealNewHand back to back for ``seconds``: latencies (ms) and failures."""
    took: list[float] = []
    failed: dict[str, int] = {}
    with DealerClient(target, timeout=10) as client:
        client.deal_new_hand("standard")  # warm the channel
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            began = time.perf_counter()
            try:
                client.deal_new_hand("standard")
                took.append((time.perf_counter() - began) * 1000)
            except FairdeckError as e:
                name = f"{type(e).__name__} {getattr(e, 'reason', '')}".strip()
                failed[name] = failed.get(name, 0) + 1
    return {
        "calls": len(took),
        "p50_ms": round(percentile(took, 0.5), 1),
        "p99_ms": round(percentile(took, 0.99), 1),
        "failed": failed,
    }


def reflection(dealer: DealerProcess, opts: argparse.Namespace) -> dict[str, Any]:
    baseline = victim(dealer.target, opts.seconds)
    out: dict[str, Any] = {"baseline": baseline}

    async def flood() -> None:
        f = await reflection_flood(dealer.target, opts.streams, opts.connections)
        await asyncio.sleep(2)  # every stream opened, the burst spent: from here they wait
        cpu0, t0, answers0 = dealer.cpu_seconds() or 0.0, time.monotonic(), f.answers
        await asyncio.sleep(max(3.0, opts.seconds / 4))  # the flood alone: what its waiting costs
        out["flood_alone"] = {
            "dealer_cpu_per_s": round(((dealer.cpu_seconds() or 0.0) - cpu0) / (time.monotonic() - t0), 3),
            "answers_per_s": round((f.answers - answers0) / (time.monotonic() - t0), 1),
        }
        cpu0, t0 = dealer.cpu_seconds() or 0.0, time.monotonic()
        result: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: result.update(victim(dealer.target, opts.seconds)))
        thread.start()
        checks: list[float] = []

        async def session() -> float | str:
            await asyncio.sleep(opts.seconds / 4)
            try:
                return round(await grpcurl_session(dealer.target, 10, timeout=30), 2)
            except Exception as e:  # reported, not raised: the bar says whether it completes
                return f"failed: {type(e).__name__} {e}"

        grpcurl = asyncio.create_task(session())
        while thread.is_alive():
            try:
                checks.append(await check_latency(dealer.target, timeout=5))
            except Exception:
                checks.append(float("inf"))
            await asyncio.sleep(0.5)
        thread.join()
        cpu = ((dealer.cpu_seconds() or 0.0) - cpu0) / (time.monotonic() - t0)
        out.update(
            flooded=result,
            session_s=await grpcurl,
            slowest_check_ms=round(max(checks) * 1000, 1),
            dealer_cpu_per_s_with_victim=round(cpu, 3),
            flood={"streams": f.streams, "answers": f.answers, "ended": dict(f.ended)},
            rss_mib=round(rss_mib(dealer.pid), 1),
        )
        await f.close()

    asyncio.run(flood())
    out["p99_ratio"] = round(out["flooded"]["p99_ms"] / max(baseline["p99_ms"], 0.001), 2)
    return out


def watch(dealer: DealerProcess, opts: argparse.Namespace) -> dict[str, Any]:
    before = rss_mib(dealer.pid)

    async def flood() -> dict[str, Any]:
        f = await watch_flood(dealer.target, opts.streams, opts.connections)
        peak = before
        end = time.monotonic() + opts.seconds
        while time.monotonic() < end:
            peak = max(peak, rss_mib(dealer.pid))
            await asyncio.sleep(0.1)
        check_ms = round(await check_latency(dealer.target) * 1000, 1)
        out = {"held_at_end": f.answered, "ended": dict(f.ended), "check_ms": check_ms}
        closing = asyncio.create_task(f.close())  # every stream ends: sampled as they do
        end = time.monotonic() + 15  # three trims (heap.TRIM_SECONDS)
        after = []
        while time.monotonic() < end:
            after.append(rss_mib(dealer.pid))
            await asyncio.sleep(0.1)
        await closing
        return {
            **out,
            "peak_open_mib": round(peak, 1),
            "peak_ending_mib": round(max(after), 1),
            "after_mib": round(after[-1], 1),
        }

    out = asyncio.run(flood())
    return {
        "before_mib": round(before, 1),
        **out,
        "cost_open_mib": round(out["peak_open_mib"] - before, 1),
        "cost_ending_mib": round(out["peak_ending_mib"] - before, 1),
        "left_mib": round(out["after_mib"] - before, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("reflection", "watch"))
    parser.add_argument("--streams", type=int, default=1500)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra flag for fairdeck serve")
    opts = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory() as tmp,
        DealerProcess(Path(tmp) / "data", Path(tmp) / "stderr", *SERVE, *opts.serve_arg) as dealer,
    ):
        result = (reflection if opts.mode == "reflection" else watch)(dealer, opts)
    print(
        json.dumps(
            {"mode": opts.mode, "streams": opts.streams, "connections": opts.connections, **result}, indent=1
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
