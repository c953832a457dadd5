"""The void wave: five tenants abandon 10,000 hands each; another tenant's calls meanwhile.

One dealer (``--require-auth``, the default caps, ``--max-hand-lifetime`` LIFETIME) in its own
process. A victim tenant calls DealNewHand then CloseHand (both log an entry; 5 s deadline), every
20 ms from start to end. After a baseline, five tenants each open 10,000 hands with
DealHands(close=false) at once and walk away.
When their lifetime passes the reaper voids the 50,000 hands; the wave's window is read from
/metrics (fairdeck_hands_closed_total{outcome="voided"}, polled every 0.1 s). Prints the victim's
p50/p99 and failed calls for the baseline, between the opening and the wave, and for the wave,
and the wave's duration, as JSON.
The bar (issue: "Void wave"): no failed call and a p99 at most 2x the baseline's.

    .venv/bin/python bench/void_wave_bench.py
    .venv/bin/python bench/void_wave_bench.py --tenants 2 --hands 2000 --lifetime 15 --baseline 5
    .venv/bin/python bench/void_wave_bench.py --dealer-code /path/to/other/checkout
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from abuse_bench import _token  # noqa: E402
from loadgen import percentile  # noqa: E402
from server_process import Server, serve_argv  # noqa: E402

from fairdeck.client import DealerClient  # noqa: E402
from fairdeck.client.exceptions import FairdeckError  # noqa: E402


def voided(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^fairdeck_hands_closed_total\{outcome="voided"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def summary(calls: list[tuple[float, float, bool]], start: float, end: float) -> dict[str, float]:
    inside = [(lat, ok) for t, lat, ok in calls if start <= t <= end]
    lats = sorted(lat * 1000 for lat, ok in inside if ok)
    return {
        "calls": len(inside),
        "failed": sum(1 for _, ok in inside if not ok),
        "p50_ms": round(percentile(lats, 50), 2) if lats else 0.0,
        "p99_ms": round(percentile(lats, 99), 2) if lats else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tenants", type=int, default=5)
    ap.add_argument("--hands", type=int, default=10_000)
    ap.add_argument("--lifetime", type=float, default=40.0)
    ap.add_argument("--baseline", type=float, default=10.0)
    ap.add_argument("--dealer-code", type=Path, help="another checkout whose server runs the dealer")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        data = tmp / "data"
        argv = serve_argv(data, "--require-auth", "--max-hand-lifetime", f"{opts.lifetime:g}")
        argv += ["--max-open-hands", "10000", "--metrics-listen", "127.0.0.1:0", "--log-level", "INFO"]
        env = dict(os.environ)
        if opts.dealer_code is not None:  # another version's server and client, first on the path
            code = opts.dealer_code.resolve()
            env["PYTHONPATH"] = os.pathsep.join([str(code / "server"), str(code / "client")])
        dealer = Server("dealer", argv, tmp / "dealer.log", env=env)
        try:
            tokens = {t: _token(data, t, env) for t in [f"t{i}" for i in range(opts.tenants)] + ["victim"]}
            url = ""
            deadline = time.monotonic() + 30
            while not url and time.monotonic() < deadline:
                found = re.search(r"metrics on (http://\S+/metrics)", (tmp / "dealer.log").read_text())
                url = found.group(1) if found else ""
                time.sleep(0.1)
            calls: list[tuple[float, float, bool]] = []
            stop = threading.Event()

            def victim() -> None:
                with DealerClient(dealer.target, api_token=tokens["victim"], timeout=5, retries=0) as c:
                    while not stop.is_set():
                        hand_id = None
                        t = time.monotonic()
                        try:
                            hand_id = c.deal_new_hand("standard").hand.hand_id
                            ok = True
                        except FairdeckError:
                            ok = False
                        calls.append((t, time.monotonic() - t, ok))
                        if hand_id is not None:  # closed, so that only the abandoned hands are voided
                            t = time.monotonic()
                            try:
                                c.close_hand(hand_id)
                                ok = True
                            except FairdeckError:
                                ok = False
                            calls.append((t, time.monotonic() - t, ok))
                        stop.wait(0.02)

            threading.Thread(target=victim, daemon=True).start()
            began = time.monotonic()
            time.sleep(opts.baseline)
            base_end = time.monotonic()

            def abandon(tenant: str) -> None:
                with DealerClient(dealer.target, api_token=tokens[tenant]) as c:
                    for _ in c.deal_hands("standard", opts.hands, close=False):
                        pass

            with ThreadPoolExecutor(opts.tenants) as pool:
                list(pool.map(abandon, [f"t{i}" for i in range(opts.tenants)]))
            opened = time.monotonic()
            total = opts.tenants * opts.hands
            wave_start = wave_end = None
            timeline: list[tuple[float, float]] = []
            while wave_end is None and time.monotonic() - opened < opts.lifetime + 600:
                n = voided(url)
                now = time.monotonic()
                if n and (not timeline or now - timeline[-1][0] >= 1.0):
                    timeline.append((now, n))
                if wave_start is None and n > 0:
                    wave_start = now
                if n >= total:
                    wave_end = now
                time.sleep(0.1)
            time.sleep(1.0)
            stop.set()
            if wave_start is None or wave_end is None:
                print(f"the wave did not end: {voided(url):.0f} of {total} voided", file=sys.stderr)
                return 1
            result = {
                "tenants": opts.tenants,
                "hands_each": opts.hands,
                "lifetime_s": opts.lifetime,
                "opening_s": round(opened - base_end, 2),
                "wave_s": round(wave_end - wave_start, 2),
                "voids_per_s": round(total / max(wave_end - wave_start, 1e-9)),
                "baseline": summary(calls, began + 1.0, base_end),
                "before_wave": summary(calls, opened, wave_start),
                "wave": summary(calls, wave_start, wave_end),
                "whole_run_failed": sum(1 for _, _, ok in calls if not ok),
                "voided_each_second": [int(n) for _, n in timeline],
                "open_s_after_opening": round(timeline[0][0] - opened, 2) if timeline else None,
            }
            b, w = result["baseline"], result["wave"]
            said = (tmp / "dealer.log").read_text().splitlines()
            result["reaper_lines"] = [line for line in said if "voiding stale hands" in line]  # type: ignore[assignment]
            result["p99_ratio"] = round(w["p99_ms"] / b["p99_ms"], 2) if b["p99_ms"] else None  # type: ignore[index,operator]
            print(json.dumps(result, indent=2))
        finally:
            dealer.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
