"""Load generator for bench/deal_bench.py (run as its own process).

``unary``: N coroutines on one (or a few) grpc.aio channels, each keeping one
DealNewHand call in flight back to back, for a warm-up and then a fixed
measured window. Requests are pre-serialized and responses are taken as raw
bytes (no protobuf work on the client), so the generator costs as little CPU
as grpc.aio allows. Throughput counts the calls that complete inside the
window; latencies are those calls' latencies.

``open``: an open-loop generator. DealNewHand calls are sent on a fixed
schedule, one every 1/RATE seconds whatever the answers do (not back to back),
each as its own task, so a slow server meets the same offered load and its
queue shows in the latencies. A call's latency counts from when it was
*scheduled*, not from when the generator got round to sending it, so the
generator's own lateness is charged to the latency, never hidden (no
coordinated omission); how late the sends were is reported too. The calls
scheduled inside the measured window are the ones reported (p50, p99, p99.9);
the generator waits for all of them to finish.

``batch``: K concurrent DealHands calls (server streaming) through the
generated stub (responses parsed by upb to count the hands; no SDK model
objects are built), timed from the request to the last message.

Both print one JSON object on stdout. With ``--server-pid`` the CPU seconds
the server process used during the window are read from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from typing import Any

import grpc

from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc

METHOD = "/fairdeck.v1.DealerService/DealNewHand"
OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def thread_cpu(pid: int | None) -> dict[str, tuple[float, float]]:
    """{"tid name": (user, system) CPU seconds} of each thread of a process, from /proc."""
    if pid is None:
        return {}
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        out[f"{tid} {name}"] = (int(fields[11]) / _TICK, int(fields[12]) / _TICK)
    return out


def thread_split(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]], calls: int
) -> dict[str, Any]:
    """Per thread of the server: user and system CPU us per call over the window."""
    out = {}
    for key, (user, system) in after.items():
        u0, s0 = before.get(key, (0.0, 0.0))
        if (user - u0) + (system - s0) > 0 and calls:
            out[key] = {"user_us": (user - u0) / calls * 1e6, "system_us": (system - s0) / calls * 1e6}
    return out


def machine_cpu() -> tuple[float, float]:
    """Busy and steal CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK, steal / _TICK


def percentile(sorted_xs: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_xs:
        return float("nan")
    k = max(0, min(len(sorted_xs) - 1, round(q / 100 * len(sorted_xs) + 0.5) - 1))
    return sorted_xs[k]


async def unary(args: argparse.Namespace) -> dict[str, Any]:
    channels = [grpc.aio.insecure_channel(args.target, options=OPTIONS) for _ in range(args.channels)]
    for ch in channels:
        await asyncio.wait_for(ch.channel_ready(), 10)
    calls = [ch.unary_unary(METHOD) for ch in channels]  # bytes in, bytes out
    request = pb.DealNewHandRequest(deck=args.deck).SerializeToString()
    first = await calls[0](request, timeout=10)
    pb.DealNewHandResponse.FromString(first)  # it is a real response

    loop = asyncio.get_running_loop()
    now = time.perf_counter()
    t_start = now + args.warmup
    t_end = t_start + args.duration
    latencies: list[float] = []
    errors: dict[str, int] = {}
    marks: dict[str, Any] = {}

    async def worker(call: Any) -> None:
        perf = time.perf_counter
        record = latencies.append
        while True:
            t0 = perf()
            if t0 >= t_end:
                return
            body = request
            if args.request_ids:  # as the SDK makes them (client/calls.py): time-ordered, then random
                rid = f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(8)}"
                body = pb.DealNewHandRequest(deck=args.deck, request_id=rid).SerializeToString()
            try:
                await call(body, timeout=30)
            except grpc.aio.AioRpcError as e:
                name = e.code().name
                errors[name] = errors.get(name, 0) + 1
                continue
            t1 = perf()
            if t_start <= t1 < t_end:
                record(t1 - t0)

    threads: dict[str, dict[str, tuple[float, float]]] = {}

    def mark(name: str) -> None:
        marks[name] = (time.perf_counter(), time.process_time(), proc_cpu(args.server_pid), machine_cpu())
        threads[name] = thread_cpu(args.server_pid)

    loop.call_at(loop.time() + (t_start - time.perf_counter()), mark, "start")
    loop.call_at(loop.time() + (t_end - time.perf_counter()), mark, "end")
    await asyncio.gather(*(worker(calls[i % len(calls)]) for i in range(args.concurrency)))
    for ch in channels:
        await ch.close()

    (w0, c0, s0, m0), (w1, c1, s1, m1) = marks["start"], marks["end"]
    window = w1 - w0
    latencies.sort()
    n = len(latencies)
    out: dict[str, Any] = {
        "mode": "unary",
        "target": args.target,
        "concurrency": args.concurrency,
        "channels": args.channels,
        "request_ids": args.request_ids,
        "duration_s": window,
        "calls": n,
        "calls_per_s": n / window,
        "errors": errors,
        "response_bytes": len(first),
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p90_ms": percentile(latencies, 90) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "max_ms": (latencies[-1] if latencies else float("nan")) * 1e3,
        "mean_ms": (statistics.fmean(latencies) if latencies else float("nan")) * 1e3,
        "client_cpu_s": c1 - c0,
        "client_cpu_util": (c1 - c0) / window,
    }
    if s0 is not None:
        out["server_cpu_s"] = s1 - s0
        out["server_cpu_util"] = (s1 - s0) / window
        out["server_cpu_us_per_call"] = (s1 - s0) / n * 1e6 if n else None
        # CPU used on the machine by anything but this server and this generator: other noise
        out["other_cpu_util"] = ((m1[0] - m0[0]) - (s1 - s0) - (c1 - c0)) / window
        # (Thread CPU counts in clock ticks: with under ~100 calls a window it is coarse.)
        out["server_threads"] = thread_split(threads["start"], threads["end"], n)
    out["steal_util"] = (m1[1] - m0[1]) / window
    return out


async def open_loop(args: argparse.Namespace) -> dict[str, Any]:
    channels = [grpc.aio.insecure_channel(args.target, options=OPTIONS) for _ in range(args.channels)]
    for ch in channels:
        await asyncio.wait_for(ch.channel_ready(), 10)
    calls = [ch.unary_unary(METHOD) for ch in channels]
    request = pb.DealNewHandRequest(deck=args.deck).SerializeToString()
    pb.DealNewHandResponse.FromString(await calls[0](request, timeout=10))  # it is a real response

    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    interval = 1.0 / args.rate
    t0 = perf() + 0.05
    t_start = t0 + args.warmup
    t_end = t_start + args.duration
    total = int((t_end - t0) / interval)
    latencies: list[float] = []
    lateness: list[float] = []
    errors: dict[str, int] = {}
    tasks: set[asyncio.Task[None]] = set()
    outstanding = 0
    most_outstanding = 0

    async def one(call: Any, scheduled: float, measured: bool) -> None:
        nonlocal outstanding
        outstanding += 1
        try:
            await call(request, timeout=args.timeout)
        except grpc.aio.AioRpcError as e:
            name = e.code().name
            errors[name] = errors.get(name, 0) + 1
            return
        finally:
            outstanding -= 1
        if measured:
            latencies.append(perf() - scheduled)

    mark_start: tuple[float, float | None, tuple[float, float]] | None = None
    i = 0
    while i < total:
        now = perf()
        while i < total and t0 + i * interval <= now:
            scheduled = t0 + i * interval
            measured = t_start <= scheduled < t_end
            if measured and mark_start is None:
                mark_start = (time.process_time(), proc_cpu(args.server_pid), machine_cpu())
            if measured:
                lateness.append(now - scheduled)
            task = loop.create_task(one(calls[i % len(calls)], scheduled, measured))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            most_outstanding = max(most_outstanding, outstanding + 1)
            i += 1
        if i < total:
            await asyncio.sleep(max(0.0, t0 + i * interval - perf()))
    # The window's CPU ends when its last call is sent; the calls still in flight finish after.
    c1, s1, m1 = time.process_time(), proc_cpu(args.server_pid), machine_cpu()
    if tasks:
        await asyncio.wait(set(tasks), timeout=args.timeout + 5)
    for ch in channels:
        await ch.close()
    assert mark_start is not None
    c0, s0, m0 = mark_start[0], mark_start[1], mark_start[2]
    window = args.duration
    latencies.sort()
    lateness.sort()
    n = len(latencies)
    out: dict[str, Any] = {
        "mode": "open",
        "target": args.target,
        "rate": args.rate,
        "channels": args.channels,
        "duration_s": window,
        "scheduled": len(lateness),
        "calls": n,
        "calls_per_s": n / window,
        "errors": errors,
        "most_outstanding": most_outstanding,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p90_ms": percentile(latencies, 90) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "p999_ms": percentile(latencies, 99.9) * 1e3,
        "max_ms": (latencies[-1] if latencies else float("nan")) * 1e3,
        "send_late_p50_ms": percentile(lateness, 50) * 1e3,
        "send_late_p99_ms": percentile(lateness, 99) * 1e3,
        "client_cpu_s": c1 - c0,
        "client_cpu_util": (c1 - c0) / window,
    }
    if s0 is not None and s1 is not None:
        out["server_cpu_s"] = s1 - s0
        out["server_cpu_util"] = (s1 - s0) / window
        out["server_cpu_us_per_call"] = (s1 - s0) / max(1, len(lateness)) * 1e6
        out["other_cpu_util"] = ((m1[0] - m0[0]) - (s1 - s0) - (c1 - c0)) / window
    return out


async def batch(args: argparse.Namespace) -> dict[str, Any]:
    channel = grpc.aio.insecure_channel(args.target, options=OPTIONS)
    await asyncio.wait_for(channel.channel_ready(), 10)
    stub = dealer_pb2_grpc.DealerServiceStub(channel)
    request = pb.DealHandsRequest(deck=args.deck, hand_count=args.count, close=args.close)
    samples: list[pb.DealtHand] = []

    async def one() -> tuple[int, int, float]:
        hands = messages = 0
        t_first = float("nan")
        async for response in stub.DealHands(request, timeout=600):
            if messages == 0:
                t_first = time.perf_counter()
            messages += 1
            hands += len(response.hands)
            samples.append(response.hands[0])
        return hands, messages, t_first

    m0, c0, s0, t0 = machine_cpu(), time.process_time(), proc_cpu(args.server_pid), time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(args.parallel)))
    t1, c1, s1, m1 = time.perf_counter(), time.process_time(), proc_cpu(args.server_pid), machine_cpu()
    await channel.close()

    hands = sum(r[0] for r in results)
    out: dict[str, Any] = {
        "mode": "batch",
        "target": args.target,
        "deck": args.deck,
        "close": args.close,
        "parallel_calls": args.parallel,
        "hands_per_call": args.count,
        "hands": hands,
        "messages": sum(r[1] for r in results),
        "seconds": t1 - t0,
        "decks_per_s": hands / (t1 - t0),
        "first_message_ms": (min(r[2] for r in results) - t0) * 1e3,
        "client_cpu_s": c1 - c0,
        "sample_ok": _check_samples(samples, args.deck, args.close),
    }
    if s0 is not None:
        out["server_cpu_s"] = s1 - s0
        out["server_cpu_us_per_deck"] = (s1 - s0) / hands * 1e6
        out["other_cpu_util"] = ((m1[0] - m0[0]) - (s1 - s0) - (c1 - c0)) / (t1 - t0)
    return out


def _check_samples(samples: list[pb.DealtHand], deck: str, close: bool) -> bool:
    """After timing: receipts are set, and closed hands replay to their commitment and cards."""
    from fairdeck.core.commitment import commit
    from fairdeck.core.derivation import derive_deck

    for h in samples:
        if not h.HasField("commit_receipt") or len(h.commitment) != 32:
            return False
        if close:
            if commit(deck, h.hand_id, h.server_seed) != h.commitment:
                return False
            if tuple(h.cards) != derive_deck(deck, h.hand_id, h.server_seed):
                return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    u = sub.add_parser("unary", help="DealNewHand at fixed concurrency")
    u.add_argument("--target", required=True)
    u.add_argument("--concurrency", type=int, default=16)
    u.add_argument("--channels", type=int, default=1)
    u.add_argument("--warmup", type=float, default=2.0)
    u.add_argument("--duration", type=float, default=6.0)
    u.add_argument("--deck", default="standard")
    u.add_argument("--server-pid", type=int)
    u.add_argument("--request-ids", action="store_true", help="a request id on every call, as the SDK sends")
    o = sub.add_parser("open", help="DealNewHand at a fixed offered rate (open loop)")
    o.add_argument("--target", required=True)
    o.add_argument("--rate", type=float, required=True, help="calls per second, sent on a fixed schedule")
    o.add_argument("--channels", type=int, default=1)
    o.add_argument("--warmup", type=float, default=2.0)
    o.add_argument("--duration", type=float, default=6.0)
    o.add_argument("--timeout", type=float, default=30.0, help="deadline of each call (s)")
    o.add_argument("--deck", default="standard")
    o.add_argument("--server-pid", type=int)
    b = sub.add_parser("batch", help="DealHands")
    b.add_argument("--target", required=True)
    b.add_argument("--count", type=int, default=100_000)
    b.add_argument("--parallel", type=int, default=1)
    b.add_argument("--close", action="store_true")
    b.add_argument("--deck", default="standard")
    b.add_argument("--server-pid", type=int)
    args = ap.parse_args()
    modes = {"unary": unary, "open": open_loop, "batch": batch}
    result = asyncio.run(modes[args.mode](args))
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
