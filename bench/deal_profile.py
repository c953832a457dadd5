"""deal_bench.py --profile: py-spy samples the dealer during a concurrency-64 DealNewHand
run and a DealHands call, writing raw stacks and a flame graph per run, and the hottest
functions (self, by line, inclusive) and threads are read back from the raw stacks.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import time
from pathlib import Path
from typing import Any

from server_process import PYTHON, Server, loadgen


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
