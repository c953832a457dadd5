"""CPU (user + sys) of one ``fairdeck`` command per start, two checkouts side by side.

Each checkout runs its own ``.venv/bin/python -m fairdeck.cli ARGS``; the runs alternate, so load on
the machine hits both alike, and the median child CPU of each is printed with the ratio.

    python3 bench/cli_startup_cpu.py --before /tmp/old-checkout --after . --runs 5
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess

COMMANDS = (
    ["--help"],
    ["verify", "--help"],
    ["serve", "--help"],
    ["codealer", "--help"],
    ["witness", "--help"],
    ["key", "--data", "/proc/nothere"],
    ["init", "--help"],
)


def cpu_of(root: str, argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([f"{root}/.venv/bin/python", "-m", "fairdeck.cli", *argv], cwd=root, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="checkout (with its own .venv) to compare against")
    parser.add_argument("--after", default=".", help="checkout under test (default .)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for argv in COMMANDS:
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.runs):
            for name in cpu:
                cpu[name].append(cpu_of(getattr(args, name), argv))
        old, new = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        print(
            f"fairdeck {' '.join(argv):30} before {old * 1000:6.0f} ms  after {new * 1000:6.0f} ms  "
            f"after/before {new / old:.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
