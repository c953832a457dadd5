"""Deal-path benchmark: the real dealer against a do-nothing gRPC service.

One run, one machine, one load generator (bench/loadgen.py, its own process):

1. Starts the real dealer (``python -m fairdeck.cli serve --listen 127.0.0.1:0
   --data TMP``; SQLite WAL, synchronous=FULL, group commit) and captures one
   real DealNewHandResponse from it.
2. Starts bench/trivial_server.py, which answers DealNewHand with that
   captured response (same bytes on the wire) and does nothing else.
3. For each round and each concurrency (1, 16, 64 by default) runs the load
   generator against the dealer and against the trivial service, in
   alternating order, and reports the median of the rounds, and the median
   and min of the per-round dealer/trivial ratios.
   The bar (issue 15): the dealer's server CPU per call at most 1.4x the
   trivial service's at c=16 and c=64.
3b. Open loop (bar 2): half the trivial service's measured capacity is
   offered to each server in turn on a fixed schedule (loadgen.py open);
   the dealer's p99 must be at most 1.5x the trivial service's.
4. DealHands (server streaming) on a fresh dealer: 100,000 hands per call,
   close=False and close=True, through the generated stub. Afterwards the
   dealer is stopped and the database is opened to check that every hand and
   every log entry is there. The bar: close=False at least 20,000 decks/s at
   at most 50 us of server CPU per deck (close=True reported beside it).
5. Optionally (``--profile DIR``) samples the dealer with py-spy during an
   extra concurrency-64 run and a DealHands call, and prints the hottest
   functions.

The load generator shares the machine's cores with the server it drives,
and its CPU use is reported next to the server's.

    .venv/bin/python bench/deal_bench.py                 # ~7 minutes
    .venv/bin/python bench/deal_bench.py --quick         # smoke run, ~20 s
    .venv/bin/python bench/deal_bench.py --profile bench/profiles
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
BAR_CPU = 1.4
"""Issue 15, bar 1: dealer server CPU per DealNewHand call <= 1.4x the trivial service's."""
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
"""The closed-loop throughput and p99 ratios of the earlier issue, reported for reference."""


class Server:
    """A server subprocess that prints ``... listening on HOST:PORT ...`` first."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log = log
        self._err = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            raise RuntimeError(f"{name} did not start: {line!r}; see {log}")
        self.target = line.split("listening on ", 1)[1].split()[0]
        self.pid = self.proc.pid
        # `serve --processes N` names its workers: "... N processes, pids A B)"
        workers = line.rsplit("pids ", 1)[1].rstrip(")\n").split() if "processes, pids " in line else []
        self.pids = [self.pid, *map(int, workers)]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return self.proc.returncode


def start_dealer(data: Path) -> Server:
    argv = [PYTHON, "-m", "fairdeck.cli", "serve", "--listen", "127.0.0.1:0", "--data", str(data)]
    argv += ["--log-level", "WARNING"]
    argv += ["--rate-limit", "0", "--max-open-hands", "0", "--default-deadline", "0"]  # measure, not limit
    return Server("dealer", argv, data.with_suffix(".log"))


def capture_response(target: str, path: Path) -> int:
    """One real DealNewHandResponse from the dealer, saved for the trivial server."""
    with grpc.insecure_channel(target) as channel:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        response = stub.DealNewHand(pb.DealNewHandRequest(deck="standard"), timeout=10)
    assert len(response.cards) == 52 and len(response.hand.commitment) == 32
    data = response.SerializeToString()
    path.write_bytes(data)
    return len(data)


def loadgen(args: list[str], server: Server) -> dict[str, Any]:
    argv = [
        PYTHON,
        str(HERE / "loadgen.py"),
        *args,
        "--target",
        server.target,
        "--server-pid",
        str(server.pid),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed against {server.name}: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    result["server"] = server.name
    return result


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


def profile(dealer: Server, out_dir: Path, opts: argparse.Namespace) -> dict[str, Any]:
    """py-spy the dealer during a concurrency-64 DealNewHand run and a DealHands call."""
    py_spy = Path(PYTHON).with_name("py-spy")
    out_dir.mkdir(parents=True, exist_ok=True)
    reports: dict[str, Any] = {}
    seconds = opts.warmup + opts.duration
    jobs = {
        "deal_new_hand_c64": ["unary", "--concurrency", "64", "--warmup", "1", "--duration", str(seconds)],
        "deal_hands_close": ["batch", "--count", str(opts.batch_count), "--close"],
    }
    for name, args in jobs.items():
        raw = out_dir / f"{name}.txt"
        svg = out_dir / f"{name}.svg"
        spies = [
            subprocess.Popen(
                [
                    str(py_spy),
                    "record",
                    "--pid",
                    str(dealer.pid),
                    "--rate",
                    "250",
                    "--threads",
                    "--format",
                    fmt,
                    "-o",
                    str(path),
                    "--duration",
                    str(max(3, int(seconds) - 1)),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for fmt, path in (("raw", raw), ("flamegraph", svg))
        ]
        time.sleep(0.5)
        res = loadgen(args, dealer)
        for spy in spies:
            spy.wait(60)
        reports[name] = {"loadgen": res, "raw": str(raw), "svg": str(svg), **hot_functions(raw)}
    return reports


def hot_functions(raw: Path, top: int = 15) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    if not raw.exists():
        return {"error": "py-spy produced no profile (ptrace not permitted?)"}
    self_count: collections.Counter[str] = collections.Counter()
    self_lines: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        count = int(n)
        frames = stack.split(";")
        thread, frames = frames[0], frames[1:]
        threads[thread.split("): ", 1)[-1]] += count  # "thread (TID): NAME"
        names = [_frame_name(f) for f in frames]
        if names:
            self_count[names[-1]] += count
            self_lines[_frame_name(frames[-1], line=True)] += count
        for name in set(names):
            incl[name] += count
        total += count
    share = lambda c: round(100 * c / total, 1) if total else 0.0  # noqa: E731
    return {
        "samples": total,
        "threads_pct": {k: share(v) for k, v in threads.most_common()},
        "self_pct": [(k, share(v)) for k, v in self_count.most_common(top)],
        "self_lines_pct": [(k, share(v)) for k, v in self_lines.most_common(top)],
        "inclusive_pct": [(k, share(v)) for k, v in incl.most_common(top + 10)],
    }


def _frame_name(frame: str, *, line: bool = False) -> str:
    """``func (path/to/file.py:123)`` -> ``func (to/file.py)`` (or ``to/file.py:123``)."""
    func, _, where = frame.partition(" (")
    file = where.rstrip(")")
    if not line:
        file = file.rsplit(":", 1)[0]
    short = "/".join(file.split("/")[-2:]) if file else ""
    return f"{func} ({short})" if short else func


def _git_state() -> str:
    """HEAD and whether the server/client code differs from it (the code under test)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "server", "client"],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in server/ or client/" if dirty else "")


def _progress(msg: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="dealer/trivial alternations per concurrency (3)")
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 16, 64])
    ap.add_argument("--channels", type=int, default=1, help="channels the load generator spreads calls over")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per point (2)")
    ap.add_argument("--duration", type=float, default=6.0, help="measured seconds per point (6)")
    ap.add_argument("--batch-count", type=int, default=100_000, help="hands per DealHands call (100000)")
    ap.add_argument("--batch-reps", type=int, default=2, help="DealHands calls per close mode (2)")
    ap.add_argument(
        "--batch-parallel", type=int, default=2, help="also run this many calls at once (2; 1=off)"
    )
    ap.add_argument("--profile", type=Path, metavar="DIR", help="also py-spy the dealer; profiles go here")
    ap.add_argument("--skip-unary", action="store_true", help="neither closed- nor open-loop DealNewHand")
    ap.add_argument("--skip-open", action="store_true", help="no open-loop latency bar")
    ap.add_argument(
        "--open-capacity",
        type=float,
        help="calls/s taken as the trivial service's capacity (default: measured)",
    )
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 1 round of 1 s points, 20,000-hand batches"
    )
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write all results as JSON")
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.rounds, opts.warmup, opts.duration = 1, 0.5, 1.0
        opts.batch_count, opts.batch_reps, opts.batch_parallel = 20_000, 1, 1

    result: dict[str, Any] = {
        "benchmark": "deal_bench",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "cpus": os.cpu_count(),
        "git": _git_state(),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
    }
    with tempfile.TemporaryDirectory(prefix="fairdeck-bench-") as tmp:
        tmpdir = Path(tmp)
        if not opts.skip_unary:
            dealer = start_dealer(tmpdir / "unary")
            trivial = None
            try:
                response = tmpdir / "response.bin"
                result["response_bytes"] = capture_response(dealer.target, response)
                trivial = Server(
                    "trivial",
                    [
                        PYTHON,
                        str(HERE / "trivial_server.py"),
                        "--listen",
                        "127.0.0.1:0",
                        "--response",
                        str(response),
                    ],
                    tmpdir / "trivial.log",
                )
                if opts.concurrency:
                    raw = run_unary(dealer, trivial, opts)
                    result["unary_raw"] = {str(c): v for c, v in raw.items()}
                    result["unary"] = summarize_unary(raw)
                if not opts.skip_open:
                    # Capacity: the trivial service's closed-loop throughput at c=64 (measured
                    # above, or now), the most this machine serves with the generator beside it.
                    top = max(opts.concurrency or [64])
                    if "unary_raw" in result and str(top) in result["unary_raw"]:
                        capacity = statistics.median(
                            x["calls_per_s"] for x in result["unary_raw"][str(top)]["trivial"]
                        )
                    else:
                        args = ["unary", "--concurrency", "64", "--warmup", str(opts.warmup)]
                        capacity = loadgen([*args, "--duration", str(opts.duration)], trivial)["calls_per_s"]
                    result["open"] = run_open(dealer, trivial, opts.open_capacity or capacity, opts)
                if opts.profile:
                    result["profile"] = profile(dealer, opts.profile, opts)
            finally:
                if trivial is not None:
                    trivial.stop()
                dealer.stop()
        if not opts.skip_batch:
            result["batch"] = run_batch(tmpdir / "batch", opts)
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=2))
    _print(result)
    bars = [r["pass_cpu"] for r in result.get("unary", []) if "pass_cpu" in r]
    bars += [result["open"]["pass"]] if "open" in result else []
    bars += [result["batch"]["close=False"]["pass"]] if "batch" in result else []
    return 0 if all(bars) else 1


def _print(result: dict[str, Any]) -> None:
    print(
        f"\ndeal_bench  {result['date']}  Python {result['python']}  grpcio {result['grpcio']}  "
        f"{result['cpus']} CPUs (server, load generator and trivial service share them)  git {result['git']}"
    )
    o = result["options"]
    if "unary" in result:
        print(
            f"\nDealNewHand (deck standard, response {result['response_bytes']} bytes), "
            f"{o['rounds']} rounds x ({o['warmup']} s warm-up + {o['duration']} s), "
            f"{o['channels']} channel(s); medians over rounds"
        )
        head = (
            f"{'conc':>4} {'server':<8} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'srv cpu':>7} {'us/call':>8} {'gen cpu':>7} {'other':>6}"
        )
        print(head)
        print("-" * len(head))
        for row in result["unary"]:
            for name in ("dealer", "trivial"):
                s = row[name]
                print(
                    f"{row['concurrency']:>4} {name:<8} {s['calls_per_s']:>8.0f} {s['p50_ms']:>8.2f} "
                    f"{s['p99_ms']:>8.2f} {s['server_cpu_util']:>7.0%} {s['server_cpu_us_per_call']:>8.0f} "
                    f"{s['client_cpu_util']:>7.0%} {s['other_cpu_util']:>6.0%}"
                    + (f"  errors {s['errors']}" if s["errors"] else "")
                )
            t, p, u = row["throughput_ratio"], row["p99_ratio"], row["cpu_ratio"]
            print(
                f"     dealer/trivial: CPU per call {u['median']:.2f} [{u['min']:.2f}..{u['max']:.2f}]  "
                f"throughput {t['median']:.3f} [{t['min']:.3f}..{t['max']:.3f}]  "
                f"p99 {p['median']:.2f} [{p['min']:.2f}..{p['max']:.2f}]"
            )
        print()
        for row in result["unary"]:
            if "pass_cpu" in row:
                u = row["cpu_ratio"]
                verdict = "PASS" if row["pass_cpu"] else "MISS"
                print(
                    f"{verdict}  bar 1, c={row['concurrency']}: dealer server CPU per call "
                    f"<= {BAR_CPU}x trivial: {u['median']:.2f}x (min {u['min']:.2f}, max {u['max']:.2f}; "
                    f"{row['dealer']['server_cpu_us_per_call']:.0f} vs "
                    f"{row['trivial']['server_cpu_us_per_call']:.0f} us)"
                )
        for row in result["unary"]:
            if row["concurrency"] in BAR_CONCURRENCY:
                t, p = row["throughput_ratio"], row["p99_ratio"]
                print(
                    f"info  c={row['concurrency']} closed loop: throughput {t['median']:.3f}x "
                    f"(earlier bar >= {INFO_THROUGHPUT}), p99 {p['median']:.2f}x (earlier bar <= {INFO_P99})"
                )
    if "open" in result:
        op = result["open"]
        print(
            f"\nOpen loop: {op['rate']:.0f} calls/s offered to each (= {OPEN_LOAD} x the trivial service's "
            f"capacity {op['capacity']:.0f}/s), {o['rounds']} rounds alternating; medians"
        )
        for name in ("dealer", "trivial"):
            s = op[name]
            print(
                f"  {name:<8} {s['calls_per_s']:7.0f} calls/s  "
                f"p50 {s['p50_ms']:7.2f}  p99 {s['p99_ms']:7.2f}  "
                f"p99.9 {s['p999_ms']:7.2f} ms  server cpu {s['server_cpu_us_per_call']:.0f} us/call  "
                f"other cpu {s['other_cpu_util']:.0%}" + (f"  errors {s['errors']}" if s["errors"] else "")
            )
        r, r50, r999 = op["p99_ratio"], op["p50_ratio"], op["p999_ratio"]
        verdict = "PASS" if op["pass"] else "MISS"
        print(
            f"{verdict}  bar 2: open-loop dealer p99 <= {BAR_OPEN_P99}x trivial: {r['median']:.2f}x "
            f"[{r['min']:.2f}..{r['max']:.2f}] (p50 {r50['median']:.2f}x, p99.9 {r999['median']:.2f}x)"
        )
    if "batch" in result:
        b = result["batch"]
        print(
            f"\nDealHands (deck standard, {o['batch_count']} hands per call, generated stub; "
            "every hand committed durably before it is streamed)"
        )
        for r in b["runs"]:
            print(
                f"  close={r['close']!s:<5} calls={r['parallel_calls']} {r['hands']:>7} hands "
                f"{r['seconds']:7.2f} s {r['decks_per_s']:>8.0f} decks/s  "
                f"server cpu {r['server_cpu_us_per_deck']:.0f} us/deck  "
                f"first message {r['first_message_ms']:.0f} ms  "
                f"other cpu {r['other_cpu_util']:.0%}"
            )
        d = b["durability_check"]
        print(
            f"  after SIGTERM: {d['hands_in_db']}/{d['hands_expected']} hands and "
            f"{d['log_entries_in_db']}/{d['log_entries_expected']} log entries in the database "
            f"({d['journal_mode']}), samples replay: {'OK' if d['ok'] else 'MISMATCH'}"
        )
        for key in ("close=False", "close=True"):
            s = b[key]
            verdict = ("PASS" if s["pass"] else "MISS") if key == "close=False" else "info"
            print(
                f"{verdict}  bar 3, DealHands {key}: >= {BAR_BATCH} decks/s at <= {BAR_BATCH_CPU_US:.0f} us "
                f"server CPU per deck: median {s['decks_per_s_median']:.0f} decks/s "
                f"(min {s['decks_per_s_min']:.0f}, max {s['decks_per_s_max']:.0f}; "
                f"{BAR_BATCH / s['decks_per_s_median']:.2f}x short), "
                f"{s['server_cpu_us_per_deck']:.0f} us/deck"
            )
    if "profile" in result:
        for name, rep in result["profile"].items():
            print(f"\nprofile {name} ({rep.get('samples', 0)} samples, svg {rep.get('svg')}):")
            if "error" in rep:
                print("  " + rep["error"])
                continue
            print("  threads: " + ", ".join(f"{k} {v}%" for k, v in rep["threads_pct"].items()))
            print("  self time:")
            for fn, pct in rep["self_pct"]:
                print(f"    {pct:5.1f}%  {fn}")
            print("  self time by line:")
            for fn, pct in rep["self_lines_pct"]:
                print(f"    {pct:5.1f}%  {fn}")
            print("  inclusive:")
            for fn, pct in rep["inclusive_pct"]:
                print(f"    {pct:5.1f}%  {fn}")


if __name__ == "__main__":
    sys.exit(main())
