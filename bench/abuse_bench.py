"""Abuse benchmark: what one tenant does to ANOTHER tenant's DealNewHand latency.

One run, one machine, loopback only:

1. Starts the real dealer (``python -m fairdeck.cli serve --listen 127.0.0.1:0 --require-auth``,
   every limit at its default) and makes tokens with ``fairdeck token create``: tenant
   ``victim`` and tenant ``attacker``.
2. The victim (its own process) calls DealNewHand every ``--pause`` seconds (0.1: a game table)
   for ``--seconds`` (60), closing each hand outside the timing, and reports p50, p99 and max.
3. Each row of the table (bench/abuse_attacks.py, ``ATTACKS``) runs as its own process and
   tenant, started ``--warmup`` seconds (15) before the victim's window so that the window sees
   its steady state, and kept going through it. An idle window (``--idle-seconds``) comes before
   every row and one ends the run; ratios are against the median of the idle windows.
4. The ``--processes`` row (``sigstop``) runs on a second dealer, ``serve --processes 2``: 10 s
   into the window, writers through fresh connections keep both workers writing until one is
   caught holding the writers' lock (read from /proc/locks) and stopped with SIGSTOP; the
   writers then stop, and the supervisor replaces the worker. Its ratios are against an idle
   window on that same dealer.
5. For every window: the machine's load average (/proc/loadavg) at its start and end, the CPU
   that processes other than the dealer, the victim and the attacker used (``other``), and the
   dealer's CPU, peak RSS and peak open file descriptors.

    .venv/bin/python bench/abuse_bench.py --json out.json        # about 20 minutes
    .venv/bin/python bench/abuse_bench.py --seconds 10 --warmup 3 --idle-seconds 5   # smoke run
    .venv/bin/python bench/abuse_bench.py --only unread,readers --profile bench/results/profiles
    .venv/bin/python bench/abuse_bench.py --dealer-code /path/to/old/checkout   # another version

``--profile DIR`` also samples the dealer with py-spy during each window and logs its access
lines, so that each victim call's time splits into time inside the dealer's handlers and time
before them (gRPC's queue of new calls and the event loop): what the victim waited for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from abuse_attacks import ATTACKS, attack, victim  # noqa: E402
from deal_profile import hot_functions  # noqa: E402
from loadgen import machine_cpu, proc_cpu  # noqa: E402
from server_process import PYTHON, Server  # noqa: E402

DEFAULT_ROWS = ("unread", "readers", "bulk", "gethand", "opencap", "largest", "spray", "conns", "sigstop")
"""The issue's table, the ordinary bulk dealer and the --processes row (``unread-own`` on request)."""
GOAL = 2.0
"""The victim's p99 during a row may be at most this many times its idle p99."""
ROWS = {
    **{k: v[0] for k, v in ATTACKS.items()},
    "sigstop": "serve --processes 2, a worker stopped holding the lock",
}


def _self(mode: str, *args: str) -> list[str]:
    return [PYTHON, str(Path(__file__).resolve()), mode, *args]


def _json_of(stdout: str, stderr: str, what: str) -> dict[str, Any]:
    try:
        result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
        return result
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"{what} printed no result: {stderr[-2000:]}") from None


def _token(data: Path, tenant: str, env: dict[str, str]) -> str:
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
        env=env,
    )
    return out.stdout.strip()


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


class Watch:
    """The dealer's processes while a window runs: CPU, peak RSS and peak open descriptors."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.rss = self.fds = 0.0
        self._stop = threading.Event()

    def __enter__(self) -> Watch:
        self.cpu0, self.machine0, self.t0 = self._cpu(), machine_cpu()[0], time.monotonic()
        self.load0 = _load()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _cpu(self) -> float:
        total = 0.0
        for pid in self.pids:
            with contextlib.suppress(OSError):  # a worker replaced meanwhile
                total += proc_cpu(pid) or 0.0
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            rss = fds = 0
            for pid in self.pids:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    rss += int(next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1])
                    fds += len(os.listdir(f"/proc/{pid}/fd"))
                except (OSError, StopIteration):
                    pass
            self.rss, self.fds = max(self.rss, rss / 1024), max(self.fds, fds)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        seconds = time.monotonic() - self.t0
        self.seconds = seconds
        self.dealer_cpu = (self._cpu() - self.cpu0) / seconds
        self.machine = (machine_cpu()[0] - self.machine0) / seconds
        self.load1 = _load()


def refresh_pids(dealer: Server) -> list[int]:
    """The dealer's processes now (a supervisor's workers change when one is replaced)."""
    try:
        children = Path(f"/proc/{dealer.pid}/task/{dealer.pid}/children").read_text().split()
    except OSError:
        children = []
    return [dealer.pid, *map(int, children)]


def window(
    dealer: Server, opts: argparse.Namespace, token: str, name: str, env: dict[str, str]
) -> dict[str, Any]:
    """One victim window, with the row ``name`` running (unless it is an idle window)."""
    victim_argv = _self("victim", "--target", dealer.target, "--token", token)
    victim_argv += ["--seconds", str(opts.seconds if name != "idle" else opts.idle_seconds)]
    victim_argv += ["--pause", str(opts.pause)]
    attacker = stopper = None
    if name in ATTACKS:
        attacker = subprocess.Popen(
            _self("attack", name, "--target", dealer.target, "--token", opts.attacker_token,
                  "--seconds", str(opts.seconds + opts.warmup + 5)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        time.sleep(opts.warmup)
    if name == "sigstop":
        always = opts.sigstop_writers == "always"
        stopper = Stopper(dealer, opts.attacker_token, delay=10.0, writers_after=always)
    profile = _profile(dealer, opts, name)
    with Watch(refresh_pids(dealer)) as watch:
        run = subprocess.run(victim_argv, capture_output=True, text=True, env=env)
    result = _json_of(run.stdout, run.stderr, f"victim ({name})")
    if attacker is not None:
        out, err = attacker.communicate(timeout=opts.seconds + 120)
        result["attack"] = _json_of(out, err, f"attack {name}")
        result["attacker_cpu"] = result["attack"]["cpu_cores"]
    if stopper is not None:
        result["attack"] = stopper.finish()
    result.update(
        seconds=round(watch.seconds, 1),
        dealer_cpu=round(watch.dealer_cpu, 2),
        other_cpu=round(
            watch.machine - watch.dealer_cpu - result.get("attacker_cpu", 0) - result["cpu_cores"], 2
        ),
        load=(watch.load0, watch.load1),
        rss_mb=round(watch.rss),
        fds=int(watch.fds),
    )
    if profile is not None:
        profile.wait()
        result["profile"] = hot_functions(opts.profile / f"{name}-{dealer.pid}.txt", top=12)
        result["waited"] = waited(Path(dealer.log), result["by_request_id"])
    del result["by_request_id"]
    return result


def waited(log: Path, client_ms: dict[str, float]) -> dict[str, Any]:
    """Where the victim's calls spent their time, from the dealer's access lines (JSON logs): in
    the dealer's handlers (from the first interceptor to the status), and before or after them
    (gRPC's queue of new calls, the event loop's queue, sending the answer): client - handler."""
    inside: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        if '"fairdeck.access"' in line and '"victim-' in line:
            record = json.loads(line)
            if record.get("request_id") in client_ms:
                inside[record["request_id"]] = float(record["duration_ms"])
    both = sorted(((client_ms[k], v) for k, v in inside.items()), reverse=True)
    if not both:
        return {}
    worst = both[: max(1, len(both) // 100)]
    return {
        "calls": len(both),
        "median_in_handlers_ms": statistics.median(v for _, v in both),
        "median_outside_ms": statistics.median(c - v for c, v in both),
        "worst_1pct_client_ms": statistics.fmean(c for c, _ in worst),
        "worst_1pct_in_handlers_ms": statistics.fmean(v for _, v in worst),
        "worst_1pct_outside_ms": statistics.fmean(c - v for c, v in worst),
    }


def _profile(dealer: Server, opts: argparse.Namespace, name: str) -> subprocess.Popen[bytes] | None:
    if opts.profile is None:
        return None
    opts.profile.mkdir(parents=True, exist_ok=True)
    seconds = int(opts.seconds if name != "idle" else opts.idle_seconds)
    return subprocess.Popen(
        [str(Path(PYTHON).parent / "py-spy"), "record", "-p", str(dealer.pid), "-d", str(seconds),
         "-r", "200", "--threads", "--idle", "-f", "raw",
         "-o", str(opts.profile / f"{name}-{dealer.pid}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


class Stopper:
    """The sigstop row's attacker: ``delay`` seconds in, writers through fresh connections (so
    that both workers write) until a worker is caught holding the writers' lock, then SIGSTOP
    on it (never resumed: the supervisor's job). The writers stop once it is caught: what the
    row measures is the stopped worker, not their load (``--sigstop-writers always`` keeps them
    going to the window's end, as before 2026-11-28)."""

    def __init__(self, dealer: Server, token: str, delay: float, *, writers_after: bool = False) -> None:
        import grpc

        from fairdeck.v1 import dealer_pb2 as pb
        from fairdeck.v1 import dealer_pb2_grpc

        self.dealer, self.done, self.stopped = dealer, threading.Event(), {}
        caught = threading.Event()  # set once a worker is stopped holding the lock
        lock = Path(dealer.data) / "fairdeck.writer.lock"

        def write() -> None:
            if self.done.wait(delay):
                return
            while not self.done.is_set() and (writers_after or not caught.is_set()):
                try:
                    with grpc.insecure_channel(
                        dealer.target, options=[("grpc.use_local_subchannel_pool", 1)]
                    ) as ch:
                        stub = dealer_pb2_grpc.DealerServiceStub(ch)
                        request = pb.DealHandsRequest(deck="standard", hand_count=64, close=True)
                        list(
                            stub.DealHands(
                                request, metadata=(("authorization", f"Bearer {token}"),), timeout=5
                            )
                        )
                except grpc.RpcError:
                    time.sleep(0.2)

        def stop() -> None:
            if self.done.wait(delay):
                return
            pid = refresh_pids(dealer)[-1]
            inode = str(lock.stat().st_ino)
            with contextlib.suppress(ProcessLookupError):
                while not self.done.is_set():
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(0.005)
                    if _flock_holder(inode) == pid:
                        self.stopped = {"pid": pid, "at": round(time.monotonic() - began, 2)}
                        caught.set()
                        return
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.005)

        began = time.monotonic()
        self.threads = [threading.Thread(target=write, daemon=True) for _ in range(4)]
        self.threads.append(threading.Thread(target=stop, daemon=True))
        for t in self.threads:
            t.start()

    def finish(self) -> dict[str, Any]:
        self.done.set()
        for t in self.threads:
            t.join(timeout=30)
        log = Path(self.dealer.log).read_text(errors="replace")
        lines = [x for x in log.splitlines() if "stopped answering" in x]
        return {"codes": {"stopped": self.stopped, "supervisor": lines}, "seconds": 0, "cpu_cores": 0}


def _flock_holder(inode: str) -> int | None:
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if f[1:4] == ["FLOCK", "ADVISORY", "WRITE"] and f[5].rsplit(":", 1)[-1] == inode:
            return int(f[4])
    return None


def start(
    tmp: Path, opts: argparse.Namespace, env: dict[str, str], *extra: str, name: str = "dealer"
) -> Server:
    data = tmp / name
    argv = [PYTHON, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", "--data", str(data)]
    argv += ["--require-auth", "--log-level", "INFO" if opts.profile else "WARNING", *extra, *opts.dealer_arg]
    if opts.profile:
        argv += ["--log-format", "json"]
    dealer = Server(name, argv, tmp / f"{name}.log", env=env)
    dealer.data = str(data)  # type: ignore[attr-defined]
    return dealer


def run_all(opts: argparse.Namespace) -> int:
    env = dict(os.environ)
    if opts.dealer_code is not None:  # another version's server and client, first on the path
        code = opts.dealer_code.resolve()
        env["PYTHONPATH"] = os.pathsep.join(
            [str(code / "server"), str(code / "client"), env.get("PYTHONPATH", "")]
        )
    rows = [r for r in opts.only.split(",") if r in ROWS]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="fairdeck-abuse-") as tmp_dir:
        tmp = Path(tmp_dir)
        attacks = [r for r in rows if r in ATTACKS]
        if attacks:
            dealer = start(tmp, opts, env)
            try:
                token = _token(Path(dealer.data), "victim", env)  # type: ignore[attr-defined]
                opts.attacker_token = _token(Path(dealer.data), "attacker", env)  # type: ignore[attr-defined]
                for i, row in enumerate([*attacks, None]):
                    _progress(f"idle {i + 1}")
                    results[f"idle {i + 1}"] = window(dealer, opts, token, "idle", env)
                    if row is not None:
                        _progress(f"{row}: {ROWS[row]}")
                        results[row] = window(dealer, opts, token, row, env)
            finally:
                dealer.stop()
        if "sigstop" in rows:
            group = start(tmp, opts, env, "--processes", "2", name="group")
            try:
                token = _token(Path(group.data), "victim", env)  # type: ignore[attr-defined]
                opts.attacker_token = _token(Path(group.data), "writer", env)  # type: ignore[attr-defined]
                _progress("idle (--processes 2)")
                results["idle (--processes 2)"] = window(group, opts, token, "idle", env)
                _progress("sigstop")
                results["sigstop"] = window(group, opts, token, "sigstop", env)
            finally:
                group.stop()
    _print(results, opts)
    if opts.json:
        options = {k: str(v) for k, v in vars(opts).items() if k != "attacker_token"}
        opts.json.write_text(json.dumps({"options": options, "results": results}, indent=1))
    return 0


def _progress(msg: str) -> None:
    print(f"[abuse_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _print(results: dict[str, dict[str, Any]], opts: argparse.Namespace) -> None:
    idles = [r for name, r in results.items() if name.startswith("idle ")]
    base = (
        {q: statistics.median(r[q] for r in idles) for q in ("p50_ms", "p99_ms", "max_ms")} if idles else {}
    )
    print(
        f"victim: DealNewHand every {opts.pause * 1000:g} ms, {opts.seconds:g} s windows after "
        f"{opts.warmup:g} s of warm-up; ratios against the median of {len(idles)} idle windows"
        + (
            f" (p50 {base['p50_ms']:.2f} ms, p99 {base['p99_ms']:.2f} ms, max {base['max_ms']:.1f} ms)"
            if base
            else ""
        )
    )
    head = f"{'row':<58} {'calls':>5} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
    head += f" {'p50x':>5} {'p99x':>6} {'maxx':>6}"
    head += f" {'dealer':>6} {'other':>5} {'load':>9} {'RSS':>5} {'fds':>5}  goal"
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        ref = base
        if name == "sigstop" and "idle (--processes 2)" in results:
            ref = {q: results["idle (--processes 2)"][q] for q in ("p50_ms", "p99_ms", "max_ms")}
        label = f"({name}) {ROWS[name]}" if name in ROWS else name
        ratios = [r[q] / ref[q] if ref else float("nan") for q in ("p50_ms", "p99_ms", "max_ms")]
        verdict = (
            "" if name not in ROWS else ("ok" if ratios[1] <= GOAL else f"MISS by {ratios[1] / GOAL:.1f}x")
        )
        load = f"{r['load'][0]:.1f}-{r['load'][1]:.1f}"
        print(
            f"{label[:58]:<58} {r['calls']:>5} {r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['max_ms']:>7.1f} "
            f"{ratios[0]:>5.2f} {ratios[1]:>6.2f} {ratios[2]:>6.2f} "
            f"{r['dealer_cpu']:>6.2f} {r['other_cpu']:>5.2f} "
            f"{load:>9} {r['rss_mb']:>5} {r['fds']:>5}  {verdict}"
        )
    print()
    for name, r in results.items():
        bad = {k: v for k, v in r["codes"].items() if k != "OK"}
        line = f"  {name}: victim errors {bad or 'none'}; worst calls (s into window, ms) {r['worst']}"
        if "attack" in r:
            line += f"; attack: {r['attack']['codes']}, attacker CPU {r['attack']['cpu_cores']} cores"
        print(line)
        if r.get("waited"):
            print(f"      victim's time: {r['waited']}")
        for k, v in (r.get("profile") or {}).get("self_pct", [])[:8]:
            print(f"      {v:5.1f}%  {k}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode")
    run = sub.add_parser("run", help="the whole benchmark (default)")
    run.add_argument("--seconds", type=float, default=60.0, help="each row's measured window (60)")
    run.add_argument(
        "--warmup", type=float, default=15.0, help="the row running before its window opens (15)"
    )
    run.add_argument("--idle-seconds", type=float, default=30.0, help="each idle window (30)")
    run.add_argument("--pause", type=float, default=0.1, help="the victim's pause between calls (0.1 s)")
    run.add_argument("--only", default=",".join(DEFAULT_ROWS), help="rows to run, e.g. unread,readers")
    run.add_argument("--json", type=Path, help="also write the results here")
    run.add_argument(
        "--profile", type=Path, metavar="DIR", help="py-spy the dealer in each window, raw stacks here"
    )
    run.add_argument(
        "--dealer-code", type=Path, metavar="DIR", help="run the dealer from this checkout's code"
    )
    run.add_argument("--dealer-arg", action="append", default=[], help="one more `fairdeck serve` argument")
    run.add_argument(
        "--sigstop-writers", choices=("until-stop", "always"), default="until-stop",
        help="the sigstop row's writers: until a worker is stopped (default), or to the window's end",
    )  # fmt: skip
    vic = sub.add_parser("victim")
    att = sub.add_parser("attack")
    att.add_argument("attack", choices=sorted(ATTACKS))
    for p in (vic, att):
        p.add_argument("--target", required=True)
        p.add_argument("--token", required=True)
        p.add_argument("--seconds", type=float, required=True)
        p.add_argument("--pause", type=float, default=0.1)
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("run", "victim", "attack", "-h", "--help"):
        args.insert(0, "run")
    opts = parser.parse_args(args)
    if opts.mode == "victim":
        print(json.dumps(victim(opts)))
        return 0
    if opts.mode == "attack":
        print(json.dumps(attack(opts)))
        return 0
    return run_all(opts)


if __name__ == "__main__":
    sys.exit(main())
