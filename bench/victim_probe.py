"""Where a victim's slow calls go during an attack, step by step inside the dealer.

One dealer (``--require-auth``, default limits), the abuse benchmark's GetHand flood (2,500
concurrent calls from one grpc.aio client, wave after wave; ``--attack ROW``: another row of
bench/abuse_attacks.py) and a victim calling DealNewHand every 20 ms with its own request ids.
The dealer runs with bench/probe_site on its PYTHONPATH, which times each awaited step of the
victim's calls, the storage threads' batches that held them, and every garbage collection over
1 ms. Prints the victim's p50/p99/max, its worst calls with their steps (start and length, ms
from the first) and how far into the flood's wave each came, and the collections by generation.
A diagnostic with a 20 ms victim pause: its ratios are not the abuse table's (abuse_bench.py).

    .venv/bin/python bench/victim_probe.py --seconds 30
    .venv/bin/python bench/victim_probe.py --seconds 30 --dealer-code /path/to/other/checkout
    FAIRDECK_PROBE_PHASES=1 .venv/bin/python bench/victim_probe.py --attack readers --attacker-nice 19
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import abuse_bench  # noqa: E402
from loadgen import percentile  # noqa: E402

from fairdeck.v1 import dealer_pb2 as pb  # noqa: E402
from fairdeck.v1 import dealer_pb2_grpc  # noqa: E402


def flood(target: str, token: str, seconds: float, out: str) -> None:
    """The attacker: waves of 2,500 GetHand; writes when each wave began and each answer came."""
    import asyncio

    events: list[tuple[float, int]] = []  # (time, 1 OK / 0 refused / -1 a wave begins)

    async def run() -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            metadata = (("authorization", f"Bearer {token}"),)
            opened = await stub.DealNewHand(pb.DealNewHandRequest(deck="standard"), metadata=metadata)
            request = pb.GetHandRequest(hand_id=opened.hand.hand_id)

            async def one() -> None:
                try:
                    await stub.GetHand(request, metadata=metadata, timeout=30)
                    events.append((time.time(), 1))
                except grpc.RpcError:
                    events.append((time.time(), 0))

            end = time.time() + seconds
            while time.time() < end:
                events.append((time.time(), -1))
                await asyncio.gather(*(one() for _ in range(2500)))

    asyncio.run(run())
    Path(out).write_text(json.dumps(events))


def victim(target: str, token: str, seconds: float) -> list[tuple[float, float, str]]:
    calls: list[tuple[float, float, str]] = []
    with grpc.insecure_channel(target) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        metadata = (("authorization", f"Bearer {token}"),)
        end = time.time() + seconds
        while time.time() < end:
            rid = f"victim-{len(calls)}"
            began, start = time.time(), time.perf_counter()
            hand = stub.DealNewHand(
                pb.DealNewHandRequest(deck="standard"),
                metadata=(*metadata, ("x-request-id", rid)),
                timeout=30,
            )
            calls.append((began, (time.perf_counter() - start) * 1000, rid))
            stub.CloseHand(pb.CloseHandRequest(hand_id=hand.hand.hand_id), metadata=metadata, timeout=30)
            time.sleep(0.02)
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=30.0, help="the victim's window (after 10 s of flood)"
    )
    parser.add_argument("--dealer-code", type=Path, help="run the dealer from this checkout's code")
    parser.add_argument(
        "--dealer-arg", action="append", default=[], help="one more `fairdeck serve` argument"
    )
    parser.add_argument("--worst", type=int, default=10, help="slowest victim calls to show")
    parser.add_argument(
        "--attack", default="gethand", choices=sorted(abuse_bench.ATTACKS),
        help="the other tenant: a row of bench/abuse_attacks.py (gethand: the flood, with its waves)",
    )  # fmt: skip
    parser.add_argument(
        "--attacker-nice", type=int, default=0,
        help="run the flood at this nice level (an attacker elsewhere takes no CPU from the dealer)",
    )  # fmt: skip
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairdeck-probe-") as tmp_dir:
        tmp = Path(tmp_dir)
        env = dict(os.environ, FAIRDECK_PROBE_DIR=str(tmp))
        path = [str(HERE / "probe_site")]
        if opts.dealer_code is not None:
            code = opts.dealer_code.resolve()
            path[:0] = [str(code / "server"), str(code / "client")]
        env["PYTHONPATH"] = os.pathsep.join([*path, env.get("PYTHONPATH", "")])
        dealer = abuse_bench.start(tmp, argparse.Namespace(profile=None, dealer_arg=opts.dealer_arg), env)
        try:
            plain = {k: v for k, v in env.items() if k != "FAIRDECK_PROBE_DIR"}
            token = abuse_bench._token(Path(dealer.data), "victim", plain)
            attacker = abuse_bench._token(Path(dealer.data), "attacker", plain)
            answers = tmp / "flood.json"
            nice = ["nice", "-n", str(opts.attacker_nice)] if opts.attacker_nice else []
            if opts.attack == "gethand":  # its own flood, which says when each wave began
                script = f"import sys; sys.path.insert(0, {str(HERE)!r}); import victim_probe as v; "
                script += f"v.flood({dealer.target!r}, {attacker!r}, {opts.seconds + 10}, {str(answers)!r})"
                argv = [sys.executable, "-c", script]
            else:  # the abuse benchmark's row as it is
                where = ["--target", dealer.target, "--token", attacker]
                argv = abuse_bench._self("attack", opts.attack, *where, "--seconds", str(opts.seconds + 10))
                answers.write_text("[]")
            child = subprocess.Popen([*nice, *argv], stdout=subprocess.PIPE, text=True, env=plain)
            time.sleep(10)
            calls = victim(dealer.target, token, opts.seconds)
            told = child.communicate()[0].strip()
        finally:
            dealer.stop()
        events = json.loads(answers.read_text())
        probed = [json.loads(p.read_text()) for p in tmp.glob("dealer-*.json")]
    report(calls, events, probed[0] if probed else {"gc": [], "steps": {}}, opts.worst)
    if opts.attack != "gethand" and told:
        print("  the attack's own tally:", json.loads(told.splitlines()[-1]).get("codes"))
    if probed and probed[0].get("heap"):
        print("  the dealer's tracked objects at exit:", probed[0]["heap"])
    return 0


def report(calls: list[Any], events: list[Any], probed: dict[str, Any], worst: int) -> None:
    ms = sorted(c[1] for c in calls)
    print(f"victim: {len(ms)} calls, p50 {statistics.median(ms):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
          f"max {ms[-1]:.1f} ms")  # fmt: skip
    waves = [t for t, kind in events if kind == -1]
    for began, took, rid in sorted(calls, key=lambda c: -c[1])[:worst]:
        wave = max((w for w in waves if w <= began), default=began)
        steps = sorted(probed["steps"].get(rid, []), key=lambda s: s[1])
        first = steps[0][1] if steps else 0.0
        shown = ", ".join(f"{name} @{(at - first) * 1000:.1f} +{length}" for name, at, length in steps)
        into = f"{began - wave:5.2f} s into a wave" if waves else f"{began - calls[0][0]:5.1f} s in"
        print(f"  {took:6.1f} ms, {into}: {shown}")
    by_generation: dict[int, list[float]] = defaultdict(list)
    for _, generation, length in probed["gc"]:
        by_generation[generation].append(length)
    for generation, lengths in sorted(by_generation.items()):
        print(f"  collections of generation {generation} over 1 ms: {len(lengths)}, longest "
              f"{max(lengths):.1f} ms, in all {sum(lengths):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
