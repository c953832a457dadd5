"""Start-up time of a client command (default ``fairdeck verify --help``), two checkouts side by side.

Each run is a fresh interpreter that puts one checkout's ``client`` and ``server`` first on
sys.path (dropping the editable install's finder, so the checkout named is the one
imported), runs the console script's ``main`` with the command's arguments, and exits. The
runs of the two checkouts alternate, so load on the machine hits both alike. It prints the
median and the fastest wall time of each, their ratio, and how many modules each loaded.

    .venv/bin/python bench/startup_bench.py --before /path/to/old/checkout --after . --runs 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUN = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
root = sys.argv.pop(1)
sys.path[:0] = [root + "/client", root + "/server"]
import contextlib, io
from fairdeck.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
import json
print(json.dumps([len(sys.modules), "fairdeck_server" in sys.modules, sys.modules["fairdeck"].__file__]))
"""


def once(root: Path, argv: list[str]) -> tuple[float, list[object]]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", RUN, str(root.resolve()), *argv], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout to compare against")
    parser.add_argument("--after", type=Path, default=Path("."), help="checkout under test (default .)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "argv", nargs="*", default=["verify", "--help"], help="the command (default verify --help)"
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {"before": [], "after": []}
    info: dict[str, list[object]] = {}
    for root in (args.before, args.after):
        once(root, args.argv)  # warm the file cache and the .pyc files
    for _ in range(args.runs):
        for name, root in (("before", args.before), ("after", args.after)):
            seconds, info[name] = once(root, args.argv)
            times[name].append(seconds)
    print(f"fairdeck {' '.join(args.argv)}: {args.runs} runs each, alternating")
    for name in ("before", "after"):
        modules, server, where = info[name]
        print(
            f"  {name:6}  median {statistics.median(times[name]) * 1000:6.1f} ms, "
            f"fastest {min(times[name]) * 1000:6.1f} ms, {modules} modules, "
            f"fairdeck_server loaded: {server}  ({where})"
        )
    ratio = statistics.median(times["after"]) / statistics.median(times["before"])
    print(f"  after/before (median): {ratio:.2f}x")


if __name__ == "__main__":
    main()
