"""How long a plain ``pytest`` keeps its 4 workers busy, replayed from a JUnit profile of a whole run.

It collects the suite (``-n 0``, no test run) to read each test's ``serial``, ``xdist_group`` and
``slow`` marks, then replays pytest-xdist's hand-out as tests/support/parallel.py's
``SerialLastScheduling`` does it (a unit each, then one more whenever a worker holds two tests or
fewer; the serial unit last, alone), with each test taking the seconds the profile gives it, in the
old order (the most tests first, then as collected) and in the new one (longest expected first:
from the profile itself, from a profile with +-30% noise, or from the marks alone). It prints the
end of the parallel part, the idle worker-seconds before the serial phase, and the whole.

    .venv/bin/python -m bench.suite_schedule /tmp/prof6.xml
"""

from __future__ import annotations

import argparse
import random
import sys
import xml.etree.ElementTree as ET
from collections import OrderedDict, deque
from pathlib import Path

import pytest

from tests.support.parallel import PLAIN_GUESS, SERIAL, expected_seconds, group_of

WORKERS = 4


class Marks:
    """A pytest plugin that records the collected ids and their marks, and deselects them all."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.serial: set[str] = set()
        self.groups: dict[str, str] = {}
        self.slow: set[str] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            self.ids.append(item.nodeid)
            if item.get_closest_marker("serial"):
                self.serial.add(item.nodeid)
            if item.get_closest_marker("slow"):
                self.slow.add(item.nodeid)
            if (group := group_of(item)) is not None:
                self.groups[item.nodeid] = group
        config.hook.pytest_deselected(items=list(items))
        items[:] = []


def profile(path: Path) -> dict[str, float]:
    """The seconds of each test of a JUnit file, by pytest's test id."""
    seconds: dict[str, float] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        parts = module.split(".")
        # classname is the module's dotted path, a class's name appended where the test is a method.
        for cut in range(len(parts), 0, -1):
            candidate = "/".join(parts[:cut]) + ".py"
            if Path(candidate).is_file():
                rest = parts[cut:]
                seconds["::".join([candidate, *rest, name])] = float(case.get("time", 0))
                break
    return seconds


def units(marks: Marks) -> OrderedDict[str, list[str]]:
    """The work units as SerialLastScheduling splits them, in the base class's order (most tests
    first, then as collected)."""
    found: dict[str, list[str]] = {}
    for test in marks.ids:
        scope = SERIAL if test in marks.serial else marks.groups.get(test, test)
        found.setdefault(scope, []).append(test)
    return OrderedDict(sorted(found.items(), key=lambda unit: -len(unit[1])))


def longest_first(
    queue: OrderedDict[str, list[str]], expected: dict[str, float]
) -> OrderedDict[str, list[str]]:
    return OrderedDict(sorted(queue.items(), key=lambda unit: -sum(expected[test] for test in unit[1])))


def replay(queue: OrderedDict[str, list[str]], took: dict[str, float]) -> tuple[float, float, float]:
    """(end of the parallel part, idle worker-seconds before it ended, end of the serial phase)."""
    queue = OrderedDict(queue)
    serial = queue.pop(SERIAL, [])
    held: list[deque[str]] = [deque() for _ in range(WORKERS)]
    clock = [0.0] * WORKERS

    def assign(worker: int) -> None:
        if queue:
            held[worker].extend(queue.popitem(last=False)[1])

    for worker in range(WORKERS):
        assign(worker)
    for worker in range(WORKERS):
        if len(held[worker]) <= 2:
            assign(worker)
    while any(held):
        worker = min((w for w in range(WORKERS) if held[w]), key=lambda w: clock[w])
        clock[worker] += took[held[worker].popleft()]
        if len(held[worker]) <= 2:
            assign(worker)
            while not held[worker] and queue:  # a worker left with nothing asks again at once
                assign(worker)
    end = max(clock)
    idle = sum(end - c for c in clock)
    return end, idle, end + sum(took[test] for test in serial)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    marks = Marks()
    code = pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"], plugins=[marks])
    if code not in (0, 5):
        return int(code)
    seconds = profile(args.junit)
    took = {test: seconds.get(test, PLAIN_GUESS) for test in marks.ids}
    known = sum(test in seconds for test in marks.ids)
    serial = sum(took[test] for test in marks.serial)
    print(
        f"{len(marks.ids)} tests, {known} in the profile, {sum(took.values()):.0f} s, serial {serial:.0f} s"
    )
    old = units(marks)
    noise = random.Random(args.seed)
    noisy = {test: s * noise.uniform(0.7, 1.3) for test, s in took.items()}
    slow = frozenset(marks.slow)
    orders = {
        "old: most tests first, then as collected": old,
        "new, times known (the profile's own)": longest_first(old, took),
        "new, times from another run (+-30% each)": longest_first(
            old, expected_seconds(marks.ids, noisy, slow)
        ),
        "new, no times: slow marks only": longest_first(old, expected_seconds(marks.ids, {}, slow)),
    }
    print("| order | parallel part ends | idle worker-s before it | whole |\n|---|---|---|---|")
    for name, queue in orders.items():
        end, idle, whole = replay(queue, took)
        print(f"| {name} | {end:.0f} s | {idle:.0f} | {whole:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
