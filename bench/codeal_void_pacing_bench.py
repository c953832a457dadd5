"""A wave of co-dealt voids beside a live tenant's calls: voids outside the fair admission (the old
reaper) against voids taking slots in their tenant's turns (``CodealReaper(admission=...)``).

The real dealer (``CodealDealer``), co-dealer (``CoDealer``, in process) and SQLite files on an
injected clock: N hands of a tenant that went away, opened and dealt 5 public cards, voided by one
reaper pass while a live tenant keeps ``--workers`` calls going through an ``Admission`` of
``--slots`` slots (each call: a slot, 64 KiB hashed off the loop, the slot given back). Per mode:
the wave's length, the live calls made during it, their latency (p50, p99), and the most work
at once (calls and voids).

    PYTHONPATH=. .venv/bin/python bench/codeal_void_pacing_bench.py --hands 12 --deck standard
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

from fairdeck_server import fair
from fairdeck_server.dealing.codeal_store import CodealRow
from fairdeck_server.dealing.codeal_voids import CodealReaper
from tests.support.codeal_pool import in_process


async def run(hands: int, deck: str, slots: int, workers: int, paced: bool, tmp: Path) -> str:
    now = [1_700_000_000_000]
    _, dealer, storage = in_process(tmp, now, 8000)
    await storage.start()
    for _ in range(hands):
        hand_id = (await dealer.open_hand("gone", deck)).hand_id
        await dealer.draw("gone", hand_id, 5, b"")
    now[0] += 3_600_000
    admission = fair.Admission(slots, workers)
    reaper = CodealReaper(dealer, 60, lambda: now[0], admission=admission if paced else None)
    at_work, peak = [0], [0]
    latencies: list[float] = []
    real_close = dealer.close

    async def close(tenant: str, hand_id: str, *, voided: bool = False) -> CodealRow:
        at_work[0] += 1
        peak[0] = max(peak[0], at_work[0])
        try:
            return await real_close(tenant, hand_id, voided=voided)
        finally:
            at_work[0] -= 1

    dealer.close = close  # type: ignore[method-assign]
    done = asyncio.Event()

    async def live() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            assert await admission.enter("live")
            at_work[0] += 1
            peak[0] = max(peak[0], at_work[0])
            try:
                await asyncio.to_thread(hashlib.sha256, bytes(64 * 1024))
            finally:
                at_work[0] -= 1
                admission.leave("live")
            latencies.append((time.perf_counter() - t0) * 1000)

    async def wave() -> float:
        t0 = time.perf_counter()
        await reaper.round()
        done.set()
        return time.perf_counter() - t0

    took, *_ = await asyncio.gather(wave(), *(live() for _ in range(workers)))
    await dealer.aclose()
    await storage.close()
    q = statistics.quantiles(latencies, n=100)
    mode = "in the admission" if paced else "outside (old)"
    return (
        f"| {mode} | {took:.2f} s | {len(latencies)} | {q[49]:.2f} ms | {q[98]:.2f} ms | {peak[0]} |"
        f" {reaper.voided} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=12)
    parser.add_argument("--deck", default="standard")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print("| voids | wave | live calls | live p50 | live p99 | most at work | voided |")
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.runs):
        for paced in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                print(asyncio.run(run(args.hands, args.deck, args.slots, args.workers, paced, Path(tmp))))


if __name__ == "__main__":
    main()
