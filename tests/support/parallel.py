"""How a run uses pytest-xdist (a plugin the root conftest.py loads): WORKERS processes where the
command line names no count (``-n``); ``-n 0`` or ``-p no:xdist`` runs all in one process. Most
tests wait on subprocesses, sockets and polls, so more processes than cores pay.

Where it names no ``--dist`` either, the tests marked ``paired`` (they wait out the dealer's own
timers to a bar, light on CPU) and then those marked ``serial`` (they hold time, CPU or memory to a
bar, which busy neighbours would push them past) run last: the paired ones in two lanes, the serial
ones alone. A group (``xdist_group(name)``) runs in one worker. ``SerialLastScheduling`` (workers
write the marked ids to SERIAL_DIR) hands out the longest units first (``expected_seconds``), those
marked ``light`` spread among them, and the end units last (it says how the end goes). Invariants:
no other test runs while a ``serial`` test runs; a ``paired`` test runs beside at most one other
test, itself ``paired`` (serial wins where a test has both marks); all tests of a group run in one
worker, but a serial or paired one, which leaves it; the order never changes which tests run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

SERIAL = "serial"
"""The scheduler's one work unit that holds every test marked ``serial``."""
PAIRED = "paired"
"""The mark of the tests that run two at a time after the others (``SerialLastScheduling``)."""
HEADS = ("paired::a::head", "paired::b::head")
LANES = ("paired::a", "paired::b")
"""The paired tests' units: each lane's first test (its head), then the rest of the lane."""
END = (*HEADS, *LANES, SERIAL)
"""The units handed out after every other, in this order."""
LIGHT = "light"
"""The mark of a long test that mostly waits on timers or other processes, light on CPU: a run
spreads those among the others (``spread_light``)."""
SERIAL_DIR = "FAIRDECK_SERIAL_DIR"
"""The environment variable, set by the controller for its workers: where they write the ids."""


GROUP = "xdist_group"
"""pytest-xdist's mark: the tests that share its name run in one worker."""


def write_marked_ids(
    folder: Path,
    worker: str,
    serial: list[str],
    groups: dict[str, str],
    slow: list[str],
    paired: list[str],
    light: list[str],
) -> None:
    """A worker's collected ``serial`` test ids, its grouped ones (id: group), its ``slow``, its
    ``paired`` and its ``light`` ones, written whole before it is seen."""
    part = folder / f"{worker}.part"
    marked = {"serial": serial, "groups": groups, "slow": slow, "paired": paired, "light": light}
    part.write_text(json.dumps(marked), encoding="utf-8")
    part.rename(folder / f"{worker}.json")


def group_of(item: pytest.Item) -> str | None:
    """The group an item's ``xdist_group`` marks put it in, named as ``--dist loadgroup`` names it."""
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers(GROUP)})  # fmt: skip
    return "_".join(names) or None


DURATIONS = "fairdeck/durations"
"""pytest's cache key (``.pytest_cache``) of the seconds each test took when it last ran (setup,
call and teardown), by test id: written by each run's controller, read by the next one's scheduler."""
SLOW_GUESS = 10.0
"""Seconds expected of a test marked ``slow`` that no run has timed (the mark says "more than a few
seconds"; in an idle whole run the slow-marked tests took 2 to 68 s)."""
PLAIN_GUESS = 0.5
"""Seconds expected of any other test that no run has timed (an idle whole run's mean per test)."""


def expected_seconds(
    tests: list[str], timed: dict[str, float], slow: frozenset[str], modules: dict[str, float] | None = None
) -> dict[str, float]:
    """How long each test is expected to take: its time when it last ran, else its module's mean
    in the SNAPSHOT (``modules``), else the mean of its module's timed tests, else a guess from its
    ``slow`` mark."""
    means: dict[str, list[float]] = {}
    for test, seconds in timed.items():
        means.setdefault(test.split("::", 1)[0], []).append(seconds)
    modules = modules or {}
    expected: dict[str, float] = {}
    for test in tests:
        module = test.split("::", 1)[0]
        same = means.get(module)
        if test in timed:
            expected[test] = timed[test]
        elif module in modules:
            expected[test] = modules[module]
        elif same:
            expected[test] = sum(same) / len(same)
        else:
            expected[test] = SLOW_GUESS if test in slow else PLAIN_GUESS
    return expected


SNAPSHOT = Path(__file__).with_name("durations.json")
"""An idle whole run's seconds, for the tests a checkout never ran itself (pytest's cache wins; all,
in a fresh clone, as CI's): ``{"tests": {id: s}}`` for the tests of LONG seconds or more,
``{"modules": {path: s}}`` the mean of each module's others. ``python -m tests.support.parallel``
rewrites it from this checkout's cache after a whole run; a stale one only orders worse, and never
changes which tests run."""
LONG = 1.0


def read_snapshot(path: Path = SNAPSHOT) -> tuple[dict[str, float], dict[str, float]]:
    """The SNAPSHOT's tests and module means; empty where it is missing or not as written."""
    try:
        data = json.loads(path.read_text("utf-8"))
        tests, modules = dict(data["tests"]), dict(data["modules"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}, {}
    seconds = [v for v in (*tests.values(), *modules.values())]
    if not all(isinstance(v, int | float) and v >= 0 for v in seconds):
        return {}, {}
    return {k: float(v) for k, v in tests.items()}, {k: float(v) for k, v in modules.items()}


def snapshot_of(timed: dict[str, float]) -> dict[str, dict[str, float]]:
    """What SNAPSHOT holds for the times of a whole run."""
    short: dict[str, list[float]] = {}
    for test, seconds in timed.items():
        if seconds < LONG:
            short.setdefault(test.split("::", 1)[0], []).append(seconds)
    return {
        "tests": {test: round(seconds, 1) for test, seconds in sorted(timed.items()) if seconds >= LONG},
        "modules": {module: round(sum(v) / len(v), 3) for module, v in sorted(short.items())},
    }


def spread_light(units: list[str], light: frozenset[str], most: int = 2, of: int = 4) -> list[str]:
    """``units`` (longest first) with the ``light`` ones held back just enough that no ``of``
    units in a row hold more than ``most`` of them, while others are left: longest first alone
    handed out the 10 s tests together, mostly timer-bound ones, and two cores idled while four
    workers waited (bench/README.md). Each kind keeps its own order."""
    spread: list[str] = []
    held: deque[str] = deque()
    for unit in units:
        if unit in light:
            held.append(unit)
        else:
            spread.append(unit)
        while held and sum(u in light for u in spread[max(0, len(spread) - of + 1) :]) < most:
            spread.append(held.popleft())
    return [*spread, *held]


def lanes(paired: list[str], expected: dict[str, float]) -> dict[str, str]:
    """The unit of each paired test (in collection order): two lanes about equally long (the
    longest test first into the shorter lane), each in collection order, its first test its head."""
    lane_of: dict[str, int] = {}
    load = [0.0, 0.0]
    for test in sorted(paired, key=lambda t: -expected[t]):
        lane = 0 if load[0] <= load[1] else 1
        lane_of[test] = lane
        load[lane] += expected[test]
    units: dict[str, str] = {}
    for test in paired:
        lane = lane_of[test]
        units[test] = LANES[lane] if HEADS[lane] in units.values() else HEADS[lane]
    return units


class SerialLastScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """Each test is a unit of its own (as ``load`` hands them out), except the tests of one
    ``xdist_group``, one unit a group, and the END units, handed out last. The others go out
    longest first (``expected_seconds`` of their tests, summed), the light ones spread among them.
    The END units stay in the work queue until their turn, so the base class never counts the run
    as finished, nor shuts the keeper down, while they wait.

    The end (``_end_turn``, in stages): once only END units are left, every worker but two (the
    keeper and its partner) finishes and stops; when both are idle, each gets its lane's head, and
    when both hold only that head (a worker runs its last test once told what follows), the rest of
    its lane (or, with no rest, the partner is stopped and runs its head). The partner stops once its
    lane is done; the keeper, idle and alone, gets the serial unit. Where no pair forms or it breaks
    (one worker, a crash), the one worker left gets what is left, one after another, alone."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self.folder = Path(os.environ[SERIAL_DIR])
        self.serial_ids: frozenset[str] = frozenset()
        self.groups: dict[str, str] = {}
        self.slow_ids: frozenset[str] = frozenset()
        self.light_ids: frozenset[str] = frozenset()
        self.lane_of: dict[str, str] = {}
        snapshot, self.module_means = read_snapshot()  # an idle whole run's, committed
        self.timed = {**snapshot, **timed_before(config)}  # this checkout's own runs win
        self.ordered = False
        self.keeper: Any = None
        self.partner: Any = None
        self.stage = GATHER

    def schedule(self) -> None:
        if self.collection is None and self.collection_is_completed:
            # Every worker wrote its file before it reported its collection.
            marked = [json.loads(path.read_text("utf-8")) for path in self.folder.glob("*.json")]
            self.serial_ids = frozenset(test for ids in marked for test in ids["serial"])
            self.groups = {test: group for ids in marked for test, group in ids["groups"].items()}
            self.slow_ids = frozenset(test for ids in marked for test in ids["slow"])
            self.light_ids = frozenset(test for ids in marked for test in ids["light"])
            paired_ids = {test for ids in marked for test in ids["paired"]} - self.serial_ids
            collected = next(iter(self.registered_collections.values()), [])
            paired = [test for test in collected if test in paired_ids]
            self.lane_of = lanes(
                paired, expected_seconds(paired, self.timed, self.slow_ids, self.module_means)
            )
            self.stage = FIRST  # the base class shuts every worker down if this empties the queue
            super().schedule()
            self.stage = GATHER
            for node in self.nodes:  # a run of END units alone begins its end now
                self._reschedule(node)
            return
        super().schedule()
        for node in self.nodes:  # a replacement: two units, as at the start, or it holds its one
            self._reschedule(node)  # test for ever, waiting to be told what follows (#1327)

    def _longest_first(self) -> None:
        """The work queue, its longest units first, the ``light`` ones spread among the others
        (``spread_light``); a stable sort, so units expected alike keep the base class's order (the
        most tests first, then as collected)."""
        tests = [test for unit in self.workqueue.values() for test in unit]
        expected = expected_seconds(tests, self.timed, self.slow_ids, self.module_means)
        units = sorted(
            self.workqueue, key=lambda scope: -sum(expected[test] for test in self.workqueue[scope])
        )
        light = frozenset(
            scope for scope in units if all(test in self.light_ids for test in self.workqueue[scope])
        )
        # Spread among the units handed out now: the END units go out last, whatever their length.
        others = spread_light([scope for scope in units if scope not in END], light)
        ordered = [*others, *(scope for scope in units if scope in END)]
        self.workqueue = OrderedDict((scope, self.workqueue[scope]) for scope in ordered)

    def _split_scope(self, nodeid: str) -> str:
        if nodeid in self.serial_ids:
            return SERIAL
        if nodeid in self.lane_of:
            return self.lane_of[nodeid]
        group = self.groups.get(nodeid)
        return nodeid if group is None else f"{GROUP}::{group}"

    def _assign_work_unit(self, node: Any) -> None:
        if not self.ordered:  # the base class's schedule() has queued every unit, assigned none
            self.ordered = True
            self._longest_first()
        if any(unit not in END for unit in self.workqueue):
            for unit in END:  # the base class hands out the queue's first unit
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit)
            self._send_first(node)
        else:
            self._end_turn(node)

    def _send_first(self, node: Any) -> None:
        """The base class's hand-out of the queue's first unit. A worker that died while the
        controller still had its last "test done" to read cannot be sent to (execnet's OSError,
        "cannot send"): the base class ended the run there in an INTERNALERROR. The unit goes
        back to the front of the queue, and ``remove_node`` follows for the worker."""
        scope = next(iter(self.workqueue))
        try:
            super()._assign_work_unit(node)
        except OSError:
            self.workqueue[scope] = self.assigned_work[node].pop(scope)
            self.workqueue.move_to_end(scope, last=False)

    def _idle(self, node: Any) -> bool:
        """Whether ``node`` runs nothing: at most the one test a worker holds back until it is
        told what comes next."""
        return self._pending_of(self.assigned_work[node]) <= 1

    def _give(self, node: Any, unit: str) -> None:
        self.workqueue.move_to_end(unit, last=False)
        self._send_first(node)

    def _reschedule(self, node: Any) -> None:
        """The base class's, but a worker still collecting (a replacement) gets nothing yet, and
        at the end only ``_end_turn`` decides: the base class would stop a worker that holds a
        lane's head once the queue is empty, and it would run beside a test of the others."""
        if node.shutting_down or node not in self.registered_collections:
            return
        if self.stage not in (FIRST, GATHER) or (self.workqueue and all(u in END for u in self.workqueue)):
            if self._pending_of(self.assigned_work[node]) <= 2:
                self._end_turn(node)
            return
        super()._reschedule(node)

    def _end_turn(self, node: Any) -> None:
        """Only END units are left (or were): the next step of the end for both workers of the
        pair at once (each is asked only when one of them ends a test, or a worker goes)."""
        if self.stage == FIRST:
            return
        live = [n for n in self.assigned_work if not n.shutting_down]
        if self.keeper not in live:
            self.keeper = None
        if self.partner not in live:
            self.partner = None
        if self.stage in (HEADS_OUT, LANES_OUT) and (self.keeper is None or self.partner is None):
            self.stage = ALONE  # the pair broke (a crash): what is left goes to one worker
        if self.keeper is None:
            self.keeper, self.partner = node, None if node is self.partner else self.partner
        if self.stage == ALONE and self.partner is not None:
            self.partner.shutdown()  # it runs what it holds, beside nothing: the keeper waits
            self.partner = None
        if (
            self.stage == GATHER
            and self.partner is None
            and node is not self.keeper
            and HEADS[1] in self.workqueue
        ):
            self.partner = node
        if node not in (self.keeper, self.partner):
            node.shutdown()
            return
        pair = (self.keeper, self.partner)
        both_idle = self.partner is not None and all(self._idle(worker) for worker in pair)
        if self.stage == GATHER and self.partner is not None:
            if len(self.assigned_work) == 2 and both_idle:  # the others are gone
                self._give_both(HEADS)
                self.stage = HEADS_OUT
        elif self.stage == HEADS_OUT:
            if both_idle:  # each holds its head
                self._give_both(LANES)
                self.stage = LANES_OUT
                if not any(unit in self.assigned_work[self.partner] for unit in LANES):
                    self.partner.shutdown()  # a lane of its head alone: run it now
        elif self.stage == LANES_OUT and self.partner is not None and self._idle(self.partner):
            self.partner.shutdown()  # its lane is done: it runs what it holds, then stops
        if self.stage != HEADS_OUT and len(self.assigned_work) == 1 and self._idle(self.keeper):
            left = [unit for unit in self.workqueue if unit not in END]  # a crashed worker's
            for unit in [*left, *(unit for unit in END if unit in self.workqueue)]:
                self._give(self.keeper, unit)  # alone: one after another
            self.keeper.shutdown()  # it runs what it has, then stops, as the base class's last node does
            self.stage = DONE

    def _give_both(self, step: tuple[str, str]) -> None:
        for worker, unit in zip((self.keeper, self.partner), step, strict=True):
            if unit in self.workqueue:
                self._give(worker, unit)

    def remove_node(self, node: Any) -> str | None:
        """A worker gone. One that crashed had its whole workload put back by the base class of
        pytest-xdist 3.8: its finished units too, sent again as empty lists nothing answers (the
        run hung: pytest-xdist#1378), and the test it crashed on, run again by each replacement
        until the restarts ran out (#1371). Here only its unfinished units go back, the test it
        crashed on (failed, said the controller) counted done before any worker is given work."""
        workload = self.assigned_work.pop(node)
        crashed = next((test for unit in workload.values() for test, done in unit.items() if not done), None)
        if crashed is not None:
            workload[self._split_scope(crashed)][crashed] = True
            self.workqueue.update((scope, unit) for scope, unit in workload.items() if not all(unit.values()))
        for other in list(self.assigned_work):  # the keeper may have been waiting for this one
            self._reschedule(other)
        return crashed


FIRST, GATHER, HEADS_OUT, LANES_OUT, ALONE, DONE = (
    "first",
    "gather",
    "heads out",
    "lanes out",
    "alone",
    "done",
)
"""The end's stages (``SerialLastScheduling._end_turn``)."""


def timed_before(config: pytest.Config) -> dict[str, float]:
    """The seconds each test took when it last ran, from pytest's cache (none without the cache)."""
    cache = getattr(config, "cache", None)
    timed = cache.get(DURATIONS, {}) if cache is not None else {}
    if not isinstance(timed, dict):
        return {}
    return {test: float(s) for test, s in timed.items() if isinstance(s, int | float) and s >= 0}


class Timing:
    """A run's own record of each test's seconds (setup, call and teardown, as its controller sees
    the reports), merged into pytest's cache at its end for the next run's order."""

    def __init__(self, cache: pytest.Cache) -> None:
        self.cache = cache
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        if self.seconds:
            timed = self.cache.get(DURATIONS, {})
            timed = timed if isinstance(timed, dict) else {}
            timed.update({test: round(seconds, 3) for test, seconds in self.seconds.items()})
            self.cache.set(DURATIONS, timed)


WORKERS = 4
"""Processes of a plain ``pytest`` run (bench/README.md, "Test suite in parallel", has the measurements)."""
_SERIAL_PHASE = pytest.StashKey[Path]()
"""Where a run with a serial phase has its workers write the ids of their ``serial`` tests."""


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> object:
    """Parallel by default: WORKERS processes where the command line names no count (-n), with the
    serial phase where it names no ``--dist`` either."""
    option = config.option
    if (
        getattr(option, "numprocesses", 0) is None  # xdist is loaded and -n was not given
        and not hasattr(config, "workerinput")  # not inside a worker, which must not fork more
        and not option.usepdb
        and not option.collectonly
    ):
        option.numprocesses = WORKERS
    if getattr(option, "numprocesses", None) and option.dist == "no" and not hasattr(config, "workerinput"):
        option.dist = "load"  # what pytest-xdist picks for -n alone; SerialLastScheduling is load too
        folder = Path(tempfile.mkdtemp(prefix="fairdeck-serial-"))
        config.stash[_SERIAL_PHASE] = folder
        os.environ[SERIAL_DIR] = str(folder)  # the workers, started later, inherit it
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    """Every run but a worker's times its tests, where pytest's cache is on."""
    cache = getattr(config, "cache", None)
    if cache is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Timing(cache), "fairdeck-timing")


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_SERIAL_PHASE, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``load``, with the serial phase: the tests marked ``serial`` run last, alone."""
    if _SERIAL_PHASE not in config.stash:
        return None
    return SerialLastScheduling(config, log)


@pytest.hookimpl(trylast=True)  # the run's own selection (-k, -m) is made
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    if SERIAL_DIR in os.environ:
        serial = [item.nodeid for item in items if item.get_closest_marker("serial") is not None]
        groups = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
        slow = [item.nodeid for item in items if item.get_closest_marker("slow") is not None]
        paired = [item.nodeid for item in items if item.get_closest_marker(PAIRED) is not None]
        light = [item.nodeid for item in items if item.get_closest_marker(LIGHT) is not None]
        folder = Path(os.environ[SERIAL_DIR])
        write_marked_ids(folder, workerinput["workerid"], serial, groups, slow, paired, light)


if __name__ == "__main__":  # python -m tests.support.parallel: SNAPSHOT from this checkout's cache
    cache = Path(".pytest_cache/v") / DURATIONS
    runs = json.loads(cache.read_text("utf-8"))
    SNAPSHOT.write_text(json.dumps(snapshot_of(runs), indent=0) + "\n", encoding="utf-8")
    print(f"{SNAPSHOT}: {len(runs)} tests' times from {cache}")
