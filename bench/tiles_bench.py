"""An audit from tiles against the same audit over gRPC (bench/README.md, section 9).

Given a data dir (make one with ``bench/audit_bench.py --data DIR``: 1,000,000 closed hands, 2,000,000
entries), it:

1. exports it with ``fairdeck tiles --data DIR --out TILES/log`` (timed; then timed again, when
   nothing is new);
2. serves TILES with nginx and the shipped rules (deploy/nginx; ``--server http.server`` for
   Python's) and the data dir with ``fairdeck serve``, both on 127.0.0.1;
3. times the real CLI end to end, alternating, each kind of ``--kinds``:
   - ``grpc``: ``fairdeck audit --target`` in one process (``--workers 0``): the baseline;
   - ``tiles``: ``fairdeck audit --tiles http://...`` with ``--workers W`` (default: one per core
     beside the reader, as the CLI decides);
   - ``grpc-w``, ``data``, ``data-w``: ``--target`` with W workers, ``--data`` with 0 and W.

Bar: the tiles audit (W workers) takes at most 0.8x the one-process gRPC audit's time (medians).

    .venv/bin/python bench/tiles_bench.py --data /tmp/fd1m [--runs 2] [--kinds grpc,tiles] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_process import PYTHON, Server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fairdeck.log.audit_pool import PARALLEL_FROM, available_cores, default_workers
from tests.support.nginx import Nginx

BAR = 0.8


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:6])} ... failed ({done.returncode}): {done.stdout[-500:]}{done.stderr[-1500:]}"
        )
    return elapsed, done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--kinds", default="grpc,tiles,grpc-w,data,data-w")
    ap.add_argument("--workers", type=int, default=None, help="W (default: the CLI's own choice)")
    ap.add_argument("--server", choices=("nginx", "http.server"), default="nginx")
    opts = ap.parse_args(argv)
    kinds = opts.kinds.split(",")
    workers = str(opts.workers if opts.workers is not None else default_workers(PARALLEL_FROM))
    cli = [PYTHON, "-m", "fairdeck.cli"]
    vkey = subprocess.run([*cli, "key", "--data", str(opts.data)], capture_output=True, text=True, check=True)
    key = vkey.stdout.strip()
    report: dict[str, Any] = {"data": str(opts.data)}
    with tempfile.TemporaryDirectory(prefix="tiles-bench-") as tmp:
        out = Path(tmp) / "log"
        first, done = timed([*cli, "tiles", "--data", str(opts.data), "--out", str(out)])
        again, done_again = timed([*cli, "tiles", "--data", str(opts.data), "--out", str(out)])
        files = sum(1 for p in out.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        report["export"] = {
            "first_s": round(first, 1),
            "again_s": round(again, 1),
            "files": files,
            "bytes": size,
            "first": done.stdout.strip(),
            "again": done_again.stdout.strip(),
        }
        print(
            f"export: {first:.1f}s ({files:,} files, {size / 1e6:.0f} MB); again: {again:.1f}s",
            file=sys.stderr,
        )

        if opts.server == "nginx":
            web: Any = Nginx(Path(tmp))
            url = f"{web.url}/log"
        else:
            web = subprocess.Popen(
                [PYTHON, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", tmp],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert web.stdout is not None
            port = re.search(r"port (\d+)", web.stdout.readline())
            assert port, "http.server did not start"
            url = f"http://127.0.0.1:{port.group(1)}/log"
        serve = [*cli, "serve", "--listen", "127.0.0.1:0", "--data", str(opts.data), "--log-level", "WARNING"]
        dealer = Server(
            "dealer", [*serve, "--rate-limit", "0", "--default-deadline", "0"], Path(tmp) / "dealer.log"
        )
        times: dict[str, list[float]] = {k: [] for k in kinds}
        reports: dict[str, dict[str, Any]] = {}
        where = {
            "grpc": ["--target", dealer.target, "--workers", "0"],
            "tiles": ["--tiles", url, "--workers", workers],
            "grpc-w": ["--target", dealer.target, "--workers", workers],
            "data": ["--data", str(opts.data), "--workers", "0"],
            "data-w": ["--data", str(opts.data), "--workers", workers],
        }
        report["uptime_before"] = uptime()
        try:
            for r in range(opts.runs):
                order = kinds if r % 2 == 0 else kinds[::-1]
                for kind in order:
                    elapsed, result = timed(
                        [*cli, "audit", *where[kind], "--key", key, "--json", "--no-progress"]
                    )
                    times[kind].append(elapsed)
                    reports[kind] = json.loads(result.stdout)
                    print(f"run {r}: {kind}: {elapsed:.1f}s  ({uptime()})", file=sys.stderr)
        finally:
            dealer.stop()
            if opts.server == "nginx":
                web.stop()
            else:
                web.terminate()
                web.wait()
        report["uptime_after"] = uptime()
    report["cores"] = available_cores()
    report["workers"] = int(workers)
    report["commands"] = {k: f"fairdeck audit {' '.join(where[k])} --key KEY --json" for k in kinds}
    bare = [{k: v for k, v in rep.items() if k != "seconds"} for rep in reports.values()]
    same = all(b == bare[0] for b in bare)
    ratio = statistics.median(times["tiles"]) / statistics.median(times["grpc"])
    report.update(
        seconds=times,
        medians={k: round(statistics.median(v), 1) for k, v in times.items()},
        entries=reports["tiles"]["entries"],
        same_report=same,
        ratio=round(ratio, 3),
        bar=BAR,
        verdict="PASS" if ratio <= BAR and same else "MISS",
    )
    print(json.dumps(report, indent=2))
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
