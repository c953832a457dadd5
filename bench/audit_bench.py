"""Offline-audit benchmark: ``fairdeck audit --data DIR`` over 1,000,000 closed hands.

1. **Generate** a data dir (not the thing measured; reported). The real
   server code path, in-process, without gRPC: ``SqliteStorage`` (WAL,
   synchronous=FULL, group commit) on DIR/fairdeck.db, the seed vault and log
   key created in DIR as the server does (``load_or_create_key``,
   ``load_or_create_signer``), a ``CheckpointPublisher`` signing every 0.2 s
   as the server does (started before, stopped after, so the last entry is
   covered), and ``Dealer.deal_hands(..., close=True)`` in calls of 100,000
   hands (the DealHands maximum), each creating its hands in durable chunks
   of 256 (a commit and a reveal entry per hand: 2 entries per hand).
   ``--streams K`` runs K such calls concurrently (on 2 cores K=1 is fastest:
   the path is CPU-bound under one GIL).
2. **Audit**: time the real CLI, ``fairdeck audit --data DIR --key VKEY``, in
   a subprocess, end to end (interpreter start, imports, reading the
   database, replaying every entry, the report), ``--runs`` times. Its
   maximum RSS and CPU time come from wait4.
3. **Profile** (``--profile``, or automatically when the bar is missed):
   py-spy samples the same CLI run (self and total time per function), and
   cProfile runs ``run_audit`` in-process on the same data (top functions by
   own time; cProfile's overhead inflates the total).

    .venv/bin/python bench/audit_bench.py                       # 1M hands; ~5 min generate + ~1 min audit
    .venv/bin/python bench/audit_bench.py --data /tmp/fd1m      # keep the data dir (reused when run again)
    .venv/bin/python bench/audit_bench.py --quick               # 20,000 hands, a few seconds
    .venv/bin/python bench/audit_bench.py --data /tmp/fd1m --profile /tmp/fairdeck-profiles
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import io
import json
import os
import platform
import pstats
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fairdeck_server.dealing.bulk import MAX_BATCH_HANDS
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import load_or_create_key
from fairdeck_server.publishing.log_signing import CheckpointPublisher, load_or_create_signer
from fairdeck_server.storage.sqlite import SqliteStorage

HANDS = 1_000_000
QUICK_HANDS = 20_000
BAR_SECONDS = 120.0
ORIGIN = "fairdeck.bench/audit"
DECK = "standard"
TENANT = "default"
CLIENT_SEEDS = [b"bench-player-seed"]


def fairdeck_cli() -> list[str]:
    script = Path(sys.executable).parent / "fairdeck"
    return [str(script)] if script.exists() else [sys.executable, "-m", "fairdeck.cli"]


# --- generation ---------------------------------------------------------------------------------


async def generate(data: Path, hands: int, streams: int, interval: float) -> dict[str, Any]:
    storage = SqliteStorage(data / "fairdeck.db")
    await storage.start()
    vault = load_or_create_key(data / "seed.key")
    signer = load_or_create_signer(data / "log.key", ORIGIN)
    publisher = CheckpointPublisher(storage, signer, interval=interval)
    dealer = Dealer(storage, vault)
    publisher.start()
    done = 0
    calls: list[dict[str, float]] = []
    started = time.perf_counter()
    last_print = started

    async def stream(count: int) -> None:
        nonlocal done, last_print
        left = count
        while left > 0:
            n = min(MAX_BATCH_HANDS, left)
            call_started = time.perf_counter()
            chunks = await dealer.deal_hands(TENANT, DECK, n, CLIENT_SEEDS, True)
            async for chunk in chunks:
                done += len(chunk)
                now = time.perf_counter()
                if now - last_print >= 10:
                    last_print = now
                    rate = done / (now - started)
                    eta = (hands - done) / rate if rate else 0
                    print(
                        f"  generated {done:,}/{hands:,} hands, {rate:,.0f}/s, ~{eta:.0f}s left", flush=True
                    )
            left -= n
            calls.append(
                {"hands": n, "seconds": time.perf_counter() - call_started, "hands_before": done - n}
            )

    try:
        share = [hands // streams + (1 if i < hands % streams else 0) for i in range(streams)]
        await asyncio.gather(*(stream(n) for n in share if n))
        elapsed = time.perf_counter() - started
        await publisher.stop()  # signs the final size, as the server does on shutdown
    finally:
        await storage.close()
    return {
        "hands": done,
        "seconds": elapsed,
        "hands_per_s": done / elapsed,
        "entries_per_s": 2 * done / elapsed,
        "streams": streams,
        "calls": calls,
        "checkpoint_interval": interval,
    }


def inspect_data(data: Path) -> dict[str, Any]:
    db = data / "fairdeck.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        entries = conn.execute("SELECT COUNT(*) FROM log_entries").fetchone()[0]
        hands = conn.execute("SELECT COUNT(*) FROM hands").fetchone()[0]
        checkpoints, head = conn.execute("SELECT COUNT(*), MAX(size) FROM checkpoints").fetchone()
        entry_bytes = conn.execute("SELECT SUM(LENGTH(entry)) FROM log_entries").fetchone()[0] or 0
    finally:
        conn.close()
    size = sum(p.stat().st_size for p in data.iterdir() if p.name.startswith("fairdeck.db"))
    return {
        "entries": entries,
        "hands": hands,
        "checkpoints": checkpoints,
        "head": head,
        "entry_bytes": entry_bytes,
        "db_bytes": size,
    }


# --- the audit ----------------------------------------------------------------------------------

_SUMMARY = re.compile(r"audit (OK|FAILED): ([\d,]+) entries, ([\d,]+) hands in ([\d.]+)s")


def run_cli_audit(data: Path, vkey: str, prefix: list[str] | None = None) -> dict[str, Any]:
    """``fairdeck audit --data DIR --key VKEY``, timed end to end, with its rusage."""
    argv = (prefix or []) + fairdeck_cli() + ["audit", "--data", str(data), "--key", vkey]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    # communicate() has reaped the child; its rusage is in RUSAGE_CHILDREN (cumulative), so
    # the caller diffs it. Kept simple: report the interval's children CPU.
    text = out.decode(errors="replace")
    m = _SUMMARY.search(text)
    return {
        "argv": argv,
        "returncode": proc.returncode,
        "wall_s": wall,
        "reported_s": float(m.group(4)) if m else None,
        "verdict": m.group(1) if m else None,
        "entries": int(m.group(2).replace(",", "")) if m else None,
        "hands": int(m.group(3).replace(",", "")) if m else None,
        "stdout": text[-4000:],
        "stderr": err.decode(errors="replace")[-4000:],
    }


def timed_cli_audit(data: Path, vkey: str) -> dict[str, Any]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_cli_audit(data, vkey)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["user_s"] = after.ru_utime - before.ru_utime
    result["sys_s"] = after.ru_stime - before.ru_stime
    result["max_rss_mb"] = after.ru_maxrss / 1024  # the largest child so far (KiB on Linux)
    return result


# --- profiling ---------------------------------------------------------------------------------


def py_spy_profile(data: Path, vkey: str, outdir: Path, rate: int) -> dict[str, Any]:
    py_spy = Path(sys.executable).parent / "py-spy"
    if not py_spy.exists():
        found = shutil.which("py-spy")
        if found is None:
            return {"error": "py-spy not installed (.venv/bin/pip install py-spy)"}
        py_spy = Path(found)
    raw = outdir / "audit-py-spy.txt"
    prefix = [
        str(py_spy),
        "record",
        "--function",
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        str(raw),
        "--",
    ]
    result = run_cli_audit(data, vkey, prefix)
    if not raw.exists():
        return {"error": f"py-spy wrote nothing: {result['stderr'][-500:]}"}
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        samples += n
        frames = stack.split(";")
        own[_short(frames[-1])] += n
        for f in {_short(f) for f in frames}:
            total[_short(f)] += n
    return {
        "raw": str(raw),
        "samples": samples,
        "wall_s": result["wall_s"],
        "self": [(f, n / samples) for f, n in own.most_common(25)],
        "total": [(f, n / samples) for f, n in total.most_common(40)],
    }


def _short(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py:123)"; with --function the line is the def
    m = re.match(r"(.*) \((.*?)([^/]*):(\d+)\)$", frame)
    return f"{m.group(1)} ({m.group(3)}:{m.group(4)})" if m else frame


def cprofile_run_audit(data: Path, vkey: str, outdir: Path) -> dict[str, Any]:
    from fairdeck.cli.audit_command import run_audit
    from fairdeck.log.note import Verifier
    from fairdeck_server.storage.sqlite import read_log

    source = read_log(data / "fairdeck.db")
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    report = run_audit(
        source,
        Verifier.parse(vkey),
        since=None,
        max_hand_lifetime_ms=3_600_000,
    )
    prof.disable()
    elapsed = time.perf_counter() - started
    prof.dump_stats(outdir / "audit.cprofile")
    out = {}
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(25)
        out[key] = buf.getvalue()
    return {"seconds": elapsed, "ok": report.ok, "stats": out, "file": str(outdir / "audit.cprofile")}


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hands", type=int, default=None, help=f"closed hands to generate (default {HANDS:,})")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_HANDS:,} hands")
    ap.add_argument("--data", type=Path, help="data dir; kept, and reused if it already holds the hands")
    ap.add_argument("--streams", type=int, default=1, help="concurrent deal_hands calls (default 1)")
    ap.add_argument("--checkpoint-interval", type=float, default=0.2, help="publisher interval, seconds")
    ap.add_argument("--runs", type=int, default=1, help="audit runs to time (default 1)")
    ap.add_argument("--profile", type=Path, metavar="DIR", help="profile the audit; write profiles here")
    ap.add_argument("--no-auto-profile", action="store_true", help="do not profile when the bar is missed")
    ap.add_argument("--py-spy-rate", type=int, default=100)
    ap.add_argument("--json", type=Path, help="write the raw results here")
    opts = ap.parse_args()
    hands = opts.hands or (QUICK_HANDS if opts.quick else HANDS)
    print(
        f"audit_bench: {hands:,} closed hands; Python {platform.python_version()}, "
        f"sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs",
        flush=True,
    )
    tmp = None
    if opts.data is None:
        tmp = tempfile.mkdtemp(prefix="fairdeck-auditbench-")
        data = Path(tmp)
    else:
        data = opts.data
    result: dict[str, Any] = {"hands_requested": hands}
    try:
        data.mkdir(parents=True, exist_ok=True)
        if (data / "fairdeck.db").exists():
            info = inspect_data(data)
            if info["hands"] != hands or info["entries"] != 2 * hands or info["head"] != info["entries"]:
                raise SystemExit(f"{data} holds another log ({info}); give an empty or matching --data")
            print(
                f"reusing {data}: {info['entries']:,} entries, {info['checkpoints']:,} checkpoints",
                flush=True,
            )
            result["generation"] = None
        else:
            print(f"generating into {data} (in-process Dealer.deal_hands, close=True) ...", flush=True)
            gen = asyncio.run(generate(data, hands, opts.streams, opts.checkpoint_interval))
            result["generation"] = gen
            print(
                f"generated {gen['hands']:,} hands in {gen['seconds']:.1f}s: "
                f"{gen['hands_per_s']:,.0f} hands/s, {gen['entries_per_s']:,.0f} entries/s",
                flush=True,
            )
            if opts.streams == 1 and len(gen["calls"]) > 1:
                rates = ", ".join(f"{c['hands'] / c['seconds']:,.0f}" for c in gen["calls"])
                print(f"  hands/s per DealHands-sized call of {MAX_BATCH_HANDS:,}, in order: {rates}")
            info = inspect_data(data)
        result["data"] = info
        print(
            f"data: {info['entries']:,} log entries ({info['entry_bytes'] / 1e6:.0f} MB of entries), "
            f"{info['hands']:,} hands, {info['checkpoints']:,} signed checkpoints (head {info['head']:,}), "
            f"db {info['db_bytes'] / 1e6:.0f} MB",
            flush=True,
        )
        vkey = load_or_create_signer(data / "log.key", ORIGIN).verifier.to_string()
        result["vkey"] = vkey

        runs = []
        for i in range(opts.runs):
            r = timed_cli_audit(data, vkey)
            runs.append(r)
            print(
                f"audit run {i + 1}: exit {r['returncode']}, {r['verdict']}, {r['wall_s']:.1f}s wall "
                f"(CLI reports {r['reported_s']}s for the replay), "
                f"user {r['user_s']:.1f}s sys {r['sys_s']:.1f}s, "
                f"max RSS {r['max_rss_mb']:.0f} MB",
                flush=True,
            )
            if r["returncode"] != 0 or r["verdict"] != "OK" or r["entries"] != info["entries"]:
                print(r["stdout"], r["stderr"], sep="\n")
                raise SystemExit("the audit did not pass: see above")
        result["runs"] = runs
        best = min(r["wall_s"] for r in runs)
        median = statistics.median(r["wall_s"] for r in runs)
        entries = info["entries"]
        passed = median <= BAR_SECONDS
        scale = HANDS / hands
        print()
        print(f"command: {' '.join(runs[0]['argv'])}")
        print(
            f"{'hands':>10} {'entries':>10} {'audit s (median)':>17} {'min':>6} "
            f"{'entries/s':>10} {'hands/s':>9}"
        )
        print(
            f"{hands:>10,} {entries:>10,} {median:>17.1f} {best:>6.1f} {entries / median:>10,.0f} "
            f"{hands / median:>9,.0f}"
        )
        if hands != HANDS:
            print(f"(linear extrapolation to {HANDS:,} hands: {median * scale:.0f}s)")
        verdict = "PASS" if passed else "MISS"
        print(
            f"{verdict}  audit of {hands:,} hands within {BAR_SECONDS:.0f}s: {median:.1f}s "
            f"({median / BAR_SECONDS:.0%} of the bar, "
            f"{'margin' if passed else 'over by'} {abs(BAR_SECONDS - median):.1f}s)"
        )
        result.update({"median_s": median, "min_s": best, "entries_per_s": entries / median, "pass": passed})

        outdir = opts.profile
        if outdir is None and not passed and not opts.no_auto_profile:
            outdir = Path(tempfile.mkdtemp(prefix="fairdeck-audit-profile-"))
        if outdir is not None:
            outdir.mkdir(parents=True, exist_ok=True)
            print(f"\nprofiling into {outdir} ...", flush=True)
            spy = py_spy_profile(data, vkey, outdir, opts.py_spy_rate)
            result["py_spy"] = spy
            if "error" in spy:
                print(f"py-spy: {spy['error']}")
            else:
                print(f"py-spy: {spy['samples']:,} samples over {spy['wall_s']:.1f}s; own time:")
                for f, share in spy["self"][:20]:
                    print(f"  {share:6.1%}  {f}")
                print("py-spy: total time (incl. callees):")
                for f, share in spy["total"][:30]:
                    print(f"  {share:6.1%}  {f}")
            cp = cprofile_run_audit(data, vkey, outdir)
            result["cprofile"] = cp
            print(f"\ncProfile run_audit: {cp['seconds']:.1f}s under the profiler (ok={cp['ok']})")
            print(cp["stats"]["tottime"])
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=2, default=str))
    return 0 if result.get("pass") else 1


if __name__ == "__main__":
    sys.exit(main())
