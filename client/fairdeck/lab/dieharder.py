"""Debian's dieharder, test by test, on a byte stream each test reads once from its start.

``-g 201 -f FILE`` rewinds a file that runs out, and data read twice fails an honest stream. So each
test of ``dieharder -a`` runs as its own ``-g 200`` process whose standard input is the file, its
psamples cut from 100 to what the file holds (``PSAMPLE_BYTES``, measured with 3.31.1); a test
that still runs out is reported as not run, never as passed. The final p-value is read one-sided
(dieharder's is biased toward 1 with few psamples; docs/certification.md, sections 2 and 5) and
dieharder's own assessment is kept beside it. ``diehard_sums`` ("Do Not Use" in dieharder's own
list) is shown and not counted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

PSAMPLES = 100
"""dieharder's default psamples."""
_MB = 1_000_000

# (test number, ntup or None, bytes one psample reads); dieharder -a's tests in its order.
PSAMPLE_BYTES: tuple[tuple[int, int | None, int], ...] = (
    (0, None, 4_100_000), (1, None, 8_000_000), (2, None, 9_100_000), (3, None, 6_400_000),
    (4, None, 5_000_000), (5, None, 12_400_000), (6, None, 9_600_000), (7, None, 6_600_000),
    (8, None, 4_300_000), (9, None, 9_100_000), (10, None, 4_100_000), (11, None, 4_100_000),
    (12, None, 4_100_000), (13, None, 13_200_000), (14, None, 4_000_000), (15, None, 4_400_000),
    (16, None, 9_400_000), (17, None, 84_000_000), (100, None, 4_400_000), (101, None, 4_400_000),
    (102, None, 4_400_000),
    *((200, n, 4_000_000 + 800_000 * n) for n in range(1, 13)),
    *((201, n, 4_200_000) for n in range(2, 6)),
    *((202, n, 4_000_000 + 400_000 * n) for n in range(2, 6)),
    *((203, n, 8_000_000 + 4_000_000 * n) for n in range(33)),
    (204, None, 4_100_000), (205, None, 618_400_000), (206, None, 55_200_000), (207, None, 459_200_000),
    (208, None, 121_600_000), (209, None, 264_000_000),
)  # fmt: skip

ROWS = {15: 2, 16: 2, 17: 2, 102: 30, 207: 2, 208: 2}
"""Final p-values one run of a test prints, where more than one (3.31.1: diehard_runs, diehard_craps,
marsaglia_tsang_gcd, sts_serial, dab_filltree, dab_filltree2); each is a test of the family."""


def rows(steps: list[tuple[int, int | None, int]], *, counted_only: bool = False) -> int:
    """The final p-values a plan prints: with ``counted_only``, only those the verdict counts."""
    return sum(ROWS.get(t, 1) for t, _, _ in steps if not (counted_only and t in DO_NOT_USE))


QUICK = ((0, None), (2, None), (4, None), (8, None), (15, None), (100, None), (101, None), (200, 1), (200, 2))
"""A few cheap tests for a reduced battery (tests, a first look)."""

DO_NOT_USE = {14}
"""Tests dieharder's own list marks "Do Not Use": shown, not counted."""

_ROW = re.compile(
    r"^\s*(?P<name>[a-z0-9_]+)\|\s*(?P<ntup>\d+)\|\s*(?P<tsamples>\d+)\|\s*(?P<psamples>\d+)\|"
    r"(?P<p>[0-9.]+)\|\s*(?P<assessment>PASSED|WEAK|FAILED)\s*$"
)


class DieharderMissing(Exception):
    """dieharder is not installed; the message says how to install it."""


def executable() -> str:
    found = shutil.which("dieharder")
    if found is None:
        raise DieharderMissing(
            "dieharder is not installed: `apt-get install dieharder` (Debian's package), or --dieharder none"
        )
    return found


@dataclass(frozen=True)
class Outcome:
    """One row of dieharder's output, or a test that could not run."""

    test: int
    ntup: int | None
    name: str
    psamples: int
    p: float | None
    """The final (KS) p-value as printed; None when the test did not run to the end."""
    assessment: str
    note: str = ""

    @property
    def label(self) -> str:
        return self.name + (f"[{self.ntup}]" if self.ntup is not None else "")

    @property
    def counted(self) -> bool:
        return self.p is not None and self.test not in DO_NOT_USE


def plan(size: int, which: str) -> list[tuple[int, int | None, int]]:
    """(test, ntup, psamples) for a stream of ``size`` bytes: ``which`` is "full" or "quick"."""
    chosen = PSAMPLE_BYTES if which == "full" else [t for t in PSAMPLE_BYTES if (t[0], t[1]) in QUICK]
    # 10% over the measured bytes per psample: a test that still runs out is reported, not passed.
    return [(test, ntup, max(1, min(PSAMPLES, size * 10 // (per * 11)))) for test, ntup, per in chosen]


def run_test(path: Path, test: int, ntup: int | None, psamples: int) -> list[Outcome]:
    """One dieharder test on the bytes of ``path``, read once from its start (as its stdin)."""
    args = [executable(), "-g", "200", "-d", str(test), "-p", str(psamples)]
    if ntup is not None:
        args += ["-n", str(ntup)]
    with path.open("rb") as stream:
        done = subprocess.run(args, stdin=stream, capture_output=True, check=False)  # noqa: S603
    text = (done.stdout + done.stderr).decode(errors="replace")
    rows = [m for m in map(_ROW.match, text.splitlines()) if m]
    if "EOF" in text or not rows:
        reason = "ran out of input" if "EOF" in text else f"no result (exit {done.returncode})"
        return [Outcome(test, ntup, f"test {test}", psamples, None, "NOT RUN", reason)]
    return [Outcome(test, ntup, m["name"], int(m["psamples"]), float(m["p"]), m["assessment"]) for m in rows]


def run_battery(
    path: Path,
    which: str,
    *,
    workers: int = 1,
    stop_at: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Every test of the plan on ``path``, in the plan's order, ``workers`` at a time.

    With ``stop_at`` (a bad generator's run), tests run one at a time and stop after the first
    whose p is at most ``stop_at``: the battery has rejected it, more tests add nothing.
    """
    steps = plan(path.stat().st_size, which)
    results: list[Outcome] = []
    if stop_at is not None:
        for test, ntup, p in steps:
            found = run_test(path, test, ntup, p)
            results += found
            if progress is not None:
                progress(_step(test, ntup))
            if any(o.counted and o.p is not None and o.p <= stop_at for o in found):
                break
        return results
    with ThreadPoolExecutor(max(1, workers)) as pool:
        futures = [pool.submit(run_test, path, test, ntup, p) for test, ntup, p in steps]
        for future, (test, ntup, _) in zip(futures, steps, strict=True):
            results += future.result()
            if progress is not None:
                progress(_step(test, ntup))
    return results


def _step(test: int, ntup: int | None) -> str:
    return f"dieharder -d {test}" + (f" -n {ntup}" if ntup is not None else "")
