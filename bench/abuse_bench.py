"""Abuse benchmark: what one tenant's attack costs ANOTHER tenant's DealNewHand latency.

One run, one machine, loopback only:

1. Starts the real dealer (``python -m fairdeck.cli serve --listen 127.0.0.1:0
   --require-auth``, production limits left at their defaults) and makes two
   tokens with ``fairdeck token create``: tenant ``victim`` and tenant
   ``attacker``.
2. The victim (its own process, ``victim`` mode) makes DealNewHand calls one
   after another with a short pause between them, for a fixed window, and
   reports p50 and p99. Measured idle first, then during each attack, then
   idle again; each ratio is against the first idle window of the same run.
3. Each attack runs in its own process (``attack`` mode), bounded in time and
   in calls, started a second before the victim's window:

   a. 8 threads sending DealNewHand with a text client seed of almost 4 MiB
      (just under the message limit), every one refused;
   b. 50 DealHands streams of 100,000 hands that the attacker never reads
      (25 with close=true, 25 with close=false);
   c. token spraying: 16 threads calling with random token ids;
   d. malformed authorization headers: 8 threads sending values that are not
      UTF-8, each call on a new hand-written HTTP/2 connection
      (tests/security/rawh2.py), and 8 threads sending 8 KB of ASCII garbage
      through grpcio;
   e. 2,500 concurrent GetHand calls from one client (grpc.aio), again and
      again.

   Each prints how its calls ended (status codes), so a refusal is visible,
   and the CPU it used.
4. Prints a table: window, victim p50 and p99, their ratios against the
   median of the idle windows (one before each attack and one at the end),
   the dealer's peak RSS and CPU (cores) during the window, and whether p99
   is within 2x idle.

    .venv/bin/python bench/abuse_bench.py                # about 3 minutes
    .venv/bin/python bench/abuse_bench.py --seconds 4    # smoke run
    .venv/bin/python bench/abuse_bench.py --json out.json --only a,c

The attacks share the machine's cores with the dealer and the victim, as an
attacker on the same host would; what each costs the victim is therefore an
upper bound of what it costs over a network.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # for tests/security/rawh2.py

from loadgen import percentile, proc_cpu  # noqa: E402
from server_process import PYTHON, Server  # noqa: E402

from fairdeck.v1 import dealer_pb2 as pb  # noqa: E402
from fairdeck.v1 import dealer_pb2_grpc  # noqa: E402

ATTACKS = {
    "a": "8 threads x 4 MiB text client seeds",
    "b": "50 unread DealHands streams of 100k hands",
    "c": "token spraying (random token ids)",
    "d": "malformed authorization headers",
    "e": "2,500 concurrent GetHand from one client",
}
GOAL = 2.0
"""Another tenant's p99 during an attack may be at most this many times its idle p99."""
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
CODE_NAMES = {c.value[0]: c.name for c in grpc.StatusCode}
OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def _auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def _code(error: grpc.RpcError) -> str:
    code = error.code() if hasattr(error, "code") else None
    return code.name if code is not None else type(error).__name__


# -- the victim ------------------------------------------------------------------------------


def victim(opts: argparse.Namespace) -> dict[str, Any]:
    """DealNewHand one after another for ``seconds``; latencies in ms."""
    latencies: list[float] = []
    codes: collections.Counter[str] = collections.Counter()
    with grpc.insecure_channel(opts.target) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        request = pb.DealNewHandRequest(deck="standard")
        metadata = _auth(opts.token)
        warm = stub.DealNewHand(request, metadata=metadata, timeout=30)  # connected and warm
        close = [warm.hand.hand_id]
        end = time.monotonic() + opts.seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            try:
                dealt = stub.DealNewHand(request, metadata=metadata, timeout=30)
                codes["OK"] += 1
                close.append(dealt.hand.hand_id)
            except grpc.RpcError as e:
                codes[_code(e)] += 1
            latencies.append((time.perf_counter() - start) * 1000)
            # Closed as a game server closes its hands, outside the timing: a victim that left
            # them open reached its own cap of 10,000 open hands within a run on a quiet machine.
            for hand_id in close:
                stub.CloseHand(pb.CloseHandRequest(hand_id=hand_id), metadata=metadata, timeout=30)
            close.clear()
            time.sleep(opts.pause)
    latencies.sort()
    return {
        "calls": len(latencies),
        "codes": dict(codes),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": latencies[-1] if latencies else float("nan"),
        "mean_ms": statistics.fmean(latencies) if latencies else float("nan"),
    }


# -- the attacks -----------------------------------------------------------------------------


class Budget:
    """Calls and time an attack may spend; thread-safe counts of how calls ended."""

    def __init__(self, seconds: float, calls: int) -> None:
        self.end = time.monotonic() + seconds
        self.left = calls
        self.codes: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.left <= 0 or time.monotonic() >= self.end:
                return False
            self.left -= 1
            return True

    def count(self, code: str) -> None:
        with self._lock:
            self.codes[code] += 1


def _threads(n: int, work: Callable[[], None]) -> None:
    threads = [threading.Thread(target=work, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _unary_loop(target: str, call: Callable[[Any], None], budget: Budget) -> Callable[[], None]:
    def work() -> None:
        with grpc.insecure_channel(target, options=OPTIONS) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            while budget.take():
                try:
                    call(stub)
                    budget.count("OK")
                except grpc.RpcError as e:
                    budget.count(_code(e))

    return work


def attack_big_seeds(opts: argparse.Namespace, budget: Budget) -> None:
    # "e" + combining acute: NFC has real work to do (it composes each pair), 3 bytes a pair,
    # sized to fit just under the message limit so that gRPC itself does not refuse it.
    text = "e\u0301" * (opts.seed_bytes // 3)
    request = pb.DealNewHandRequest(deck="standard", client_seeds=[pb.ClientSeed(text=text)])
    metadata = _auth(opts.token)
    _threads(8, _unary_loop(opts.target, lambda s: s.DealNewHand(request, metadata=metadata), budget))


def attack_unread_streams(opts: argparse.Namespace, budget: Budget) -> None:
    metadata = _auth(opts.token)
    channel = grpc.insecure_channel(opts.target, options=OPTIONS)
    stub = dealer_pb2_grpc.DealerServiceStub(channel)
    calls = []
    for i in range(50):
        if not budget.take():
            break
        request = pb.DealHandsRequest(deck="standard", hand_count=100_000, close=i % 2 == 0)
        calls.append(stub.DealHands(request, metadata=metadata))  # started, never read
    while time.monotonic() < budget.end:
        time.sleep(0.1)
    for call in calls:
        if call.running():
            budget.count("still streaming (cancelled by us)")
            call.cancel()
        else:
            budget.count(call.code().name)
    channel.close()


def attack_spray(opts: argparse.Namespace, budget: Budget) -> None:
    request = pb.GetHandRequest(hand_id="x")

    def call(stub: Any) -> None:
        token = f"fdk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)[:43]}"
        stub.GetHand(request, metadata=_auth(token))

    _threads(16, _unary_loop(opts.target, call, budget))


def attack_malformed(opts: argparse.Namespace, budget: Budget) -> None:
    from tests.security import rawh2

    body = pb.GetHandRequest(hand_id="x").SerializeToString()
    path = "/fairdeck.v1.DealerService/GetHand"

    def raw() -> None:
        while budget.take():
            value = b"Bearer fdk_" + secrets.token_hex(8).encode() + b"_" + os.urandom(40)
            try:
                got = rawh2.call(opts.target, path, body, [(b"authorization", value)])
                budget.count(CODE_NAMES.get(int(got["grpc-status"]), got["grpc-status"].decode()))
            except (OSError, ValueError) as e:
                budget.count(type(e).__name__)

    garbage = _auth("x" * 8000)
    request = pb.GetHandRequest(hand_id="x")
    work_ascii = _unary_loop(opts.target, lambda s: s.GetHand(request, metadata=garbage), budget)
    threads = [threading.Thread(target=raw, daemon=True) for _ in range(8)]
    threads += [threading.Thread(target=work_ascii, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def attack_get_hand_flood(opts: argparse.Namespace, budget: Budget) -> None:
    async def run() -> None:
        async with grpc.aio.insecure_channel(opts.target) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            metadata = _auth(opts.token)
            opened = await stub.DealNewHand(pb.DealNewHandRequest(deck="standard"), metadata=metadata)
            request = pb.GetHandRequest(hand_id=opened.hand.hand_id)

            async def one() -> None:
                try:
                    await stub.GetHand(request, metadata=metadata, timeout=30)
                    budget.count("OK")
                except grpc.RpcError as e:
                    budget.count(_code(e))

            while time.monotonic() < budget.end:
                wave = [one() for _ in range(2500) if budget.take()]
                if not wave:
                    break
                await asyncio.gather(*wave)

    asyncio.run(run())


ATTACK_FUNCTIONS: dict[str, Callable[[argparse.Namespace, Budget], None]] = {
    "a": attack_big_seeds,
    "b": attack_unread_streams,
    "c": attack_spray,
    "d": attack_malformed,
    "e": attack_get_hand_flood,
}


def attack(opts: argparse.Namespace) -> dict[str, Any]:
    budget = Budget(opts.seconds, opts.max_calls)
    started = time.monotonic()
    ATTACK_FUNCTIONS[opts.attack](opts, budget)
    seconds = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "codes": dict(budget.codes),
        "seconds": round(seconds, 2),
        "cpu_cores": round((usage.ru_utime + usage.ru_stime) / seconds, 2),
    }


# -- the orchestrator -------------------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class PeakRss:
    """The dealer's largest RSS while the block runs, sampled every 0.1 s."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()

    def __enter__(self) -> PeakRss:
        def sample() -> None:
            while not self._stop.is_set():
                try:
                    self.peak = max(self.peak, _rss_mb(self.pid))
                except OSError:
                    return
                self._stop.wait(0.1)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _self(mode: str, *args: str) -> list[str]:
    return [PYTHON, str(Path(__file__).resolve()), mode, *args]


def _json_of(out: subprocess.CompletedProcess[str] | tuple[str, str], what: str) -> dict[str, Any]:
    stdout, stderr = (out.stdout, out.stderr) if isinstance(out, subprocess.CompletedProcess) else out
    try:
        result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
        return result
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"{what} printed no result: {stderr[-2000:]}") from None


def _token(data: Path, tenant: str) -> str:
    out = subprocess.run(
        [
            PYTHON,
            "-m",
            "fairdeck.cli",
            "token",
            "create",
            "--data",
            str(data),
            "--tenant",
            tenant,
            "--role",
            "dealer",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def measure(dealer: Server, opts: argparse.Namespace, token: str, name: str) -> dict[str, Any]:
    """One victim window; with an attack running in parallel unless ``name`` is idle."""
    victim_argv = _self("victim", "--target", dealer.target, "--token", token, "--seconds", str(opts.seconds))
    victim_argv += ["--pause", str(opts.pause)]
    attacker = None
    if name in ATTACKS:
        attacker = subprocess.Popen(
            _self(
                "attack", name, "--target", dealer.target, "--token", opts.attacker_token,
                "--seconds", str(opts.seconds + opts.warmup), "--max-calls", str(opts.max_calls),
                "--seed-bytes", str(opts.seed_bytes),
            ),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(opts.warmup)
    cpu, wall = proc_cpu(dealer.pid) or 0.0, time.monotonic()
    with PeakRss(dealer.pid) as rss:
        result = _json_of(subprocess.run(victim_argv, capture_output=True, text=True), f"victim ({name})")
    result["dealer_rss_peak_mb"] = round(rss.peak, 1)
    result["dealer_cpu_cores"] = round(((proc_cpu(dealer.pid) or 0.0) - cpu) / (time.monotonic() - wall), 2)
    if attacker is not None:
        try:
            out = attacker.communicate(timeout=opts.seconds + 60)
        except subprocess.TimeoutExpired:
            attacker.kill()
            out = attacker.communicate()
        result["attack"] = _json_of(out, f"attack {name}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode")
    run = sub.add_parser("run", help="the whole benchmark (default)")
    run.add_argument("--seconds", type=float, default=10.0, help="each measured window")
    run.add_argument("--warmup", type=float, default=1.5, help="attack running before the window opens")
    run.add_argument("--pause", type=float, default=0.005, help="victim's pause between calls")
    run.add_argument("--max-calls", type=int, default=50_000, help="calls one attack may make at most")
    run.add_argument("--only", default=",".join(ATTACKS), help="attacks to run, e.g. a,c")
    run.add_argument("--json", type=Path, help="also write the results here")
    run.add_argument("--seed-bytes", type=int, default=MAX_MESSAGE_BYTES - 1024, help="attack a's seed size")
    run.add_argument(
        "--dealer-arg", action="append", default=[], help="one more `fairdeck serve` argument (repeatable)"
    )
    vic = sub.add_parser("victim")
    att = sub.add_parser("attack")
    att.add_argument("attack", choices=sorted(ATTACKS))
    att.add_argument("--max-calls", type=int, default=50_000)
    att.add_argument("--seed-bytes", type=int, default=MAX_MESSAGE_BYTES - 1024)
    for p in (vic, att):
        p.add_argument("--target", required=True)
        p.add_argument("--token", required=True)
        p.add_argument("--seconds", type=float, required=True)
        p.add_argument("--pause", type=float, default=0.005)
    opts = parser.parse_args(argv if argv is not None else (sys.argv[1:] or ["run"]))
    if opts.mode == "victim":
        print(json.dumps(victim(opts)))
        return 0
    if opts.mode == "attack":
        print(json.dumps(attack(opts)))
        return 0
    return run_all(opts)


def run_all(opts: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="fairdeck-abuse-") as tmp:
        data = Path(tmp) / "data"
        argv = [PYTHON, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", "--data", str(data)]
        argv += ["--require-auth", "--log-level", "WARNING", *opts.dealer_arg]
        dealer = Server("dealer", argv, Path(tmp) / "dealer.log")
        try:
            victim_token = _token(data, "victim")
            opts.attacker_token = _token(data, "attacker")
            # An idle window before every attack and one at the end: the machine is shared and
            # noisy, so the baseline is the median of several idle windows, and their spread is
            # printed as the noise floor.
            attacks = [a for a in opts.only.split(",") if a in ATTACKS]
            names = [f"idle {i + 1}" for i in range(len(attacks) + 1)]
            names[1:1] = attacks[:1]
            for i, a in enumerate(attacks[1:], start=2):
                names.insert(names.index(f"idle {i}") + 1, a)
            results: dict[str, dict[str, Any]] = {}
            for name in names:
                print(f"[abuse_bench] {name}: {ATTACKS.get(name, 'no attack')}", file=sys.stderr, flush=True)
                results[name] = measure(dealer, opts, victim_token, name)
                time.sleep(1.0)  # let the dealer settle between windows
        finally:
            code = dealer.stop()
            log_tail = (Path(tmp) / "dealer.log").read_text()[-1500:]
    _print(results, opts)
    if code != 0:
        print(f"dealer exited {code}; its log ends:\n{log_tail}", file=sys.stderr)
    if opts.json:
        opts.json.write_text(json.dumps({"options": _options(opts), "results": results}, indent=1))
    return 0


def _options(opts: argparse.Namespace) -> dict[str, Any]:
    """The run's options, for the JSON file (not the attacker's token)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items() if k != "attacker_token"}


def _print(results: dict[str, dict[str, Any]], opts: argparse.Namespace) -> None:
    idles = [r for name, r in results.items() if name not in ATTACKS]
    idle = {q: statistics.median(r[q] for r in idles) for q in ("p50_ms", "p99_ms")}
    print(
        f"victim: DealNewHand one at a time, {opts.pause * 1000:g} ms apart, {opts.seconds:g} s windows; "
        f"ratios against the median of the {len(idles)} idle windows "
        f"(p50 {idle['p50_ms']:.2f} ms, p99 {idle['p99_ms']:.2f} ms)"
    )
    header = f"{'window':<52} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'p50 x':>6} {'p99 x':>6}"
    header += f" {'RSS MB':>7} {'dealer CPU':>10}  goal"
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        label = f"({name}) {ATTACKS[name]}" if name in ATTACKS else name
        p50x, p99x = r["p50_ms"] / idle["p50_ms"], r["p99_ms"] / idle["p99_ms"]
        verdict = "" if name not in ATTACKS else ("ok" if p99x <= GOAL else "MISS")
        print(
            f"{label:<52} {r['calls']:>6} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {p50x:>6.2f} {p99x:>6.2f} "
            f"{r['dealer_rss_peak_mb']:>7.0f} {r['dealer_cpu_cores']:>10.2f}  {verdict}"
        )
    print()
    for name, r in results.items():
        bad = {k: v for k, v in r["codes"].items() if k != "OK"}
        line = f"  {name}: victim errors {bad or 'none'}"
        if "attack" in r:
            attack = r["attack"]
            line += f"; attack calls ended {attack['codes']} in {attack['seconds']} s"
            line += f", attacker CPU {attack['cpu_cores']} cores"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
