"""A plain ``pytest`` runs in parallel, its ``serial`` tests run last, alone, in one process, the
tests of one ``xdist_group`` in one process, and the longest expected first (tests/support/
parallel.py): checked on small suites of their own, each run once as the README runs ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.parallel import (
    DURATIONS,
    LONG,
    PLAIN_GUESS,
    expected_seconds,
    read_snapshot,
    snapshot_of,
    spread_light,
)

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.xdist_group("parallel_run")  # the tests share one run of the small suite

CONFTEST = """
import os
import pytest

def log(what):
    line = f"{what} {os.environ.get('PYTEST_XDIST_WORKER', '-')} {os.getpid()}\\n"
    fd = os.open(os.environ["SPANS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)

@pytest.fixture(autouse=True)
def span(request):
    log(f"start {request.node.name}")
    yield
    log(f"end {request.node.name}")
"""

SUITE = """
import pytest

@pytest.mark.parametrize("i", range(20))
def test_before(i):
    pass

@pytest.mark.serial
@pytest.mark.parametrize("i", range(3))
def test_alone(i):
    pass

@pytest.mark.parametrize("i", range(20))
def test_after(i):
    pass
"""

GROUPED = """
import pytest
from conftest import log

pytestmark = pytest.mark.xdist_group("shared")

@pytest.fixture(scope="module")
def shared():
    log("build shared")

@pytest.mark.parametrize("i", range(8))
def test_grouped(shared, i, worker_id):
    assert worker_id.startswith("gw")

@pytest.mark.serial
def test_grouped_alone():
    pass
"""
PAIRED = """
import os
import pytest
from tests.support.waits import wait_for

def started_elsewhere():
    # Whether a paired test has started in another worker.
    with open(os.environ["SPANS"]) as spans:
        lines = [line.split() for line in spans]
    mine = os.environ["PYTEST_XDIST_WORKER"]
    return any(what == "start" and name.startswith("test_paired") and worker != mine
               for what, name, worker, _ in lines)

@pytest.mark.paired
@pytest.mark.parametrize("i", range(6))
def test_paired(i):
    # Two lanes at once: each lane's first test waits until the other lane has begun.
    wait_for("a paired test in another worker", started_elsewhere, timeout=120)

@pytest.mark.paired
@pytest.mark.serial
def test_paired_and_serial():
    pass
"""
TESTS = 20 + 3 + 20 + 8 + 1 + 6 + 1
SERIAL = ("test_alone", "test_grouped_alone", "test_paired_and_serial")


def run_suite(tree: Path, *args: str, spans: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A small suite in ``tree`` run as the README runs ours, with this plugin (``spans``: where its
    tests write their lines); a hang fails the test after 240 s instead of stalling it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **({"SPANS": str(spans)} if spans else {})}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.parallel", *args],
        cwd=tree, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


@pytest.fixture(scope="module")
def spans(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    """The lines the small suite's tests wrote: ``start|end name worker pid`` and ``build ...``."""
    tree = tmp_path_factory.mktemp("suite")
    files = (("conftest.py", CONFTEST), ("test_suite.py", SUITE), ("test_grouped.py", GROUPED))
    for name, text in (*files, ("test_paired.py", PAIRED)):
        (tree / name).write_text(textwrap.dedent(text))
    (tree / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n    paired: two at once\n")
    spans = tree / "spans"
    done = run_suite(tree, "-p", "no:cacheprovider", spans=spans)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{TESTS} passed" in done.stdout, done.stdout[-3000:]
    return [line.split() for line in spans.read_text().splitlines()]


def test_a_plain_run_is_parallel_and_runs_its_serial_tests_last_and_alone(spans: list[list[str]]) -> None:
    lines = [line for line in spans if line[0] != "build"]
    assert len(lines) == 2 * TESTS
    workers = {worker for _, _, worker, _ in lines}
    assert len(workers) > 1 and "-" not in workers, workers  # parallel, in pytest-xdist's workers
    serial = [i for i, (_, name, _, _) in enumerate(lines) if name.startswith(SERIAL)]
    assert len(serial) == 2 * 5 and min(serial) == len(lines) - 10, lines  # all others ended first
    assert len({lines[i][2] for i in serial}) == 1, lines  # one worker ran them
    assert [lines[i][0] for i in serial] == ["start", "end"] * 5, lines  # one after the other


def test_paired_tests_run_after_the_others_two_at_a_time_and_beside_no_other(spans: list[list[str]]) -> None:
    """The paired tests ran in two workers at once (each lane's first test waited for the other
    lane to begin), after every test but the serial ones, and beside no test but one paired."""
    lines = [line for line in spans if line[0] != "build"]
    paired = [i for i, (_, name, _, _) in enumerate(lines) if name.startswith("test_paired[")]
    others = [i for i, (_, name, _, _) in enumerate(lines) if not name.startswith(("test_paired[", *SERIAL))]
    assert len(paired) == 2 * 6 and min(paired) > max(others), lines  # after the others ended
    assert len({lines[i][2] for i in paired}) == 2, lines  # two lanes
    running: set[str] = set()
    for what, name, _, _ in lines:
        running.symmetric_difference_update({name})
        if what == "start" and name.startswith("test_paired["):
            assert len(running) <= 2 and all(n.startswith("test_paired[") for n in running), (name, running)


def test_the_tests_of_one_xdist_group_run_in_one_worker_that_builds_its_module_fixture_once(
    spans: list[list[str]],
) -> None:
    builds = [line for line in spans if line[0] == "build"]
    grouped = [line for line in spans if line[1].startswith("test_grouped[")]
    assert len(grouped) == 2 * 8, spans  # none lost
    assert len(builds) == 1, builds
    assert {line[2] for line in grouped} == {builds[0][2]}, spans  # that one worker ran them all


TIMED = """
import pytest

@pytest.mark.parametrize("i", range(12))
def test_timed(i):
    pass
"""

MARKED = """
import pytest

@pytest.mark.parametrize("i", range(4))
def test_plain(i):
    pass

@pytest.mark.slow
def test_slow():
    pass
"""
LAST_TIMES = {f"test_timed.py::test_timed[{i}]": {7: 60.0, 3: 50.0}.get(i, 0.01) for i in range(12)}
"""What a run before took, as its controller left it in pytest's cache: two long tests, late in the
collection; test_marked.py's tests never ran (its ``slow`` one is expected to be long)."""


@pytest.fixture(scope="module")
def ordered(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[list[str]], dict[str, float]]:
    """A plain run of a small suite whose cache holds LAST_TIMES: the lines its tests wrote, and the
    times its own run left in the cache."""
    tree = tmp_path_factory.mktemp("ordered")
    for name, text in (("conftest.py", CONFTEST), ("test_timed.py", TIMED), ("test_marked.py", MARKED)):
        (tree / name).write_text(textwrap.dedent(text))
    (tree / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n    slow: long\n")
    durations = tree / ".pytest_cache" / "v" / DURATIONS
    durations.parent.mkdir(parents=True)
    durations.write_text(json.dumps(LAST_TIMES))
    spans = tree / "spans"
    done = run_suite(tree, spans=spans)
    assert done.returncode == 0 and "17 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return [line.split() for line in spans.read_text().splitlines()], json.loads(durations.read_text())


def test_the_longest_tests_go_out_first_so_none_starts_while_the_other_workers_run_dry(
    ordered: tuple[list[list[str]], dict[str, float]],
) -> None:
    """The units went out most tests first, then as collected: a run's longest tests (a live
    collection, the fuzz, the browser modules, late in the collection) started near its end, while
    the other workers ran out of work and waited for them before the serial phase."""
    spans, _ = ordered
    first: dict[str, str] = {}
    for what, name, worker, _ in spans:
        if what == "start":
            first.setdefault(worker, name)
    assert len(first) == 4, spans  # one test each, to begin with: the four longest expected
    assert set(first.values()) == {"test_timed[7]", "test_timed[3]", "test_slow", "test_plain[0]"}, spans


def test_a_run_leaves_each_tests_time_for_the_next_runs_order(
    ordered: tuple[list[list[str]], dict[str, float]],
) -> None:
    _, timed = ordered
    names = [f"test_timed.py::test_timed[{i}]" for i in range(12)]
    names += [f"test_marked.py::test_plain[{i}]" for i in range(4)] + ["test_marked.py::test_slow"]
    assert set(timed) == set(names), timed
    assert all(0 <= timed[name] < 50 for name in names), timed  # this run's own times, not the last


def test_a_checkout_with_no_times_of_its_own_orders_by_the_committed_snapshot(tmp_path: Path) -> None:
    """A fresh clone (CI's) has no pytest cache: its order came from the ``slow`` marks alone, and
    its paired lanes were split by count. SNAPSHOT gives it an idle whole run's times: a long test
    by its id, any other by its module's mean, a module it lacks by the guesses."""
    timed = {"a.py::long": 30.0, "a.py::short": 0.2, "a.py::shorter": 0.1, "b.py::x": 0.4}
    path = tmp_path / "durations.json"
    path.write_text(json.dumps(snapshot_of(timed)))
    tests, modules = read_snapshot(path)
    assert tests == {"a.py::long": 30.0} and modules == {"a.py": 0.15, "b.py": 0.4}
    expected = expected_seconds(
        ["a.py::long", "a.py::new", "b.py::x", "c.py::y"], tests, frozenset(), modules
    )
    assert expected == {"a.py::long": 30.0, "a.py::new": 0.15, "b.py::x": 0.4, "c.py::y": PLAIN_GUESS}
    path.write_text('{"tests": {"a.py::long": -1}, "modules": {}}')  # not as written: ignored
    assert read_snapshot(path) == ({}, {})
    tests, modules = read_snapshot()  # the committed one
    assert tests and modules and all(seconds >= LONG for seconds in tests.values())


LIGHT = """
import pytest

@pytest.mark.light
@pytest.mark.parametrize("i", range(4))
def test_waits(i):
    pass

@pytest.mark.parametrize("i", range(4))
def test_works(i):
    pass

def test_short():
    pass

@pytest.mark.paired
def test_paired():
    pass
"""
LIGHT_TIMES = {
    **{f"test_light.py::test_waits[{i}]": 50.0 - i for i in range(4)},
    **{f"test_light.py::test_works[{i}]": 40.0 - i for i in range(4)},
    "test_light.py::test_short": 0.01,
    "test_light.py::test_paired": 48.5,  # among the light ones by length, yet handed out last
}


def test_long_light_tests_go_out_spread_among_the_others_not_together(tmp_path: Path) -> None:
    """Longest first alone gave the four workers four 10 s timer-bound tests at once, and two cores
    idled (bench/README.md); ``light`` ones now go out at most two in any four, counted among
    the units handed out then (a paired lane's head, as long as they, goes out last: counted, it
    let three in four through). One worker, so the tests start in the order handed out."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_light.py").write_text(textwrap.dedent(LIGHT))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    light: waits\n    paired: two at once\n")
    durations = tmp_path / ".pytest_cache" / "v" / DURATIONS
    durations.parent.mkdir(parents=True)
    durations.write_text(json.dumps(LIGHT_TIMES))
    spans = tmp_path / "spans"
    done = run_suite(tmp_path, "-n", "1", spans=spans)
    assert done.returncode == 0 and "10 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    started = [
        line[1] for line in (line.split() for line in spans.read_text().splitlines()) if line[0] == "start"
    ]
    waits, works = [f"test_waits[{i}]" for i in range(4)], [f"test_works[{i}]" for i in range(4)]
    assert started == [*waits[:2], *works[:2], *waits[2:], *works[2:], "test_short", "test_paired"], started


@pytest.mark.parametrize("seed", range(200))
def test_spread_light_keeps_each_kind_in_order_and_at_most_two_light_in_four(seed: int) -> None:
    import random

    draw = random.Random(seed)
    units = [f"u{i}" for i in range(draw.randrange(0, 30))]
    light = frozenset(u for u in units if draw.random() < draw.choice((0.2, 0.5, 0.8)))
    spread = spread_light(units, light)
    assert sorted(spread) == sorted(units)
    assert [u for u in spread if u in light] == [u for u in units if u in light]
    assert [u for u in spread if u not in light] == [u for u in units if u not in light]
    last_other = max((k for k, u in enumerate(spread) if u not in light), default=-1)
    for k in range(max(0, last_other - 2)):  # while others are left to go between them
        assert sum(u in light for u in spread[k : k + 4]) <= 2, (k, spread, sorted(light))


def test_spread_light_holds_a_light_unit_back_only_as_far_as_the_rule_needs() -> None:
    assert spread_light(["a", "b", "c"], frozenset("abc")) == ["a", "b", "c"]  # no others to wait for
    assert spread_light(["a", "b", "c", "x", "y"], frozenset("abc")) == ["a", "b", "x", "y", "c"]


CRASHING = """
import os
import pytest

@pytest.mark.parametrize("i", range(6))
def test_before(i):
    pass

{mark}
def test_crash():
    os._exit(3)  # the worker dies, as on a segfault

@pytest.mark.parametrize("i", range(6))
def test_after(i):
    pass

@pytest.mark.paired
@pytest.mark.parametrize("i", range(4))
def test_paired(i):
    pass

@pytest.mark.serial
@pytest.mark.parametrize("i", range(2))
def test_alone(i):
    pass
"""


@pytest.mark.parametrize("mark", ["", "@pytest.mark.paired", "@pytest.mark.serial", "last"])
def test_a_worker_that_crashes_in_any_phase_fails_its_test_once_and_the_run_ends(
    tmp_path: Path, mark: str
) -> None:
    """pytest-xdist 3.8 put a crashed worker's finished units back as empty lists nothing answers,
    ran the test it crashed on again in each replacement, and left a replacement holding its one
    test for ever: the run hung after a crash (tests/support/parallel.py, remove_node)."""
    text = CRASHING.format(mark="" if mark == "last" else mark)
    if mark == "last":  # the last unit of the others: the pair waits, and took it up again at once
        text = text.replace("def test_crash", "def test_zz_crash")
        text = text.replace("def test_after", "def test_aa_after")
    (tmp_path / "test_crash.py").write_text(textwrap.dedent(text))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n    paired: two at once\n")
    done = run_suite(tmp_path, "-p", "no:cacheprovider", "-n", "2")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    # Failed once, not again in each replacement (which made it "5 failed" with the rest unrun).
    assert "1 failed, 18 passed" in done.stdout, done.stdout[-3000:]
    assert "crashed while running 'test_crash.py::test_" in done.stdout, done.stdout[-3000:]
    assert done.stdout.count("node down") == 1, done.stdout[-3000:]


LATE_REPORT = """
import os
import pytest

TOLD = os.path.join(os.path.dirname(__file__), "crash-next")

@pytest.fixture(autouse=True)
def crash_after_one_test(request):
    # The only worker runs one test, then dies as its next test starts, as on a segfault.
    if os.environ["PYTEST_XDIST_WORKER"] == "gw0":
        if os.path.exists(TOLD):
            with open(TOLD + ".pid", "w") as pid:
                pid.write(str(os.getpid()))
            os._exit(3)
        with open(TOLD, "w") as told:
            told.write(request.node.nodeid)
    yield

@pytest.mark.parametrize("i", range(8))
def test_one(i):
    pass
"""
LATE_CONFTEST = """
import os
import threading
from tests.support.waits import wait_for

def dead(path):
    # The crashed worker: gone, or a zombie its parent has not reaped yet.
    try:
        with open(path) as pid:
            number = pid.read()
        if not number:  # made, not yet written
            return False
        with open(f"/proc/{number}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return os.path.exists(path)

def pytest_configure(config):
    # The controller's order, made certain: gw0's first "test done" is read once gw0 is dead and
    # its pipe closed (below), and the end of gw0's channel, which marks it down, only after that.
    # Between the two the scheduler sees a worker not yet down that cannot be sent to, as under load
    # (execnet's receiver closes the pipe, then delivers the end from another thread).
    if hasattr(config, "workerinput"):
        return
    from xdist import dsession, workermanage
    read = threading.Event()
    held = os.path.join(str(config.rootpath), "end-held")
    complete = dsession.DSession.worker_runtest_protocol_complete
    remote = workermanage.WorkerController.process_from_remote

    def worker_runtest_protocol_complete(self, **kwargs):
        try:
            complete(self, **kwargs)
        finally:
            if kwargs["node"].gateway.id == "gw0":
                read.set()

    def process_from_remote(self, eventcall):
        if eventcall is workermanage.Marker.END and self.gateway.id == "gw0":
            if read.wait(timeout=60) and not os.path.exists(held):  # the order was made, not timed out
                open(held, "w").close()
        return remote(self, eventcall)

    dsession.DSession.worker_runtest_protocol_complete = worker_runtest_protocol_complete
    workermanage.WorkerController.process_from_remote = process_from_remote

def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)
    if node is None or report.when != "teardown" or node.gateway.id != "gw0":
        return
    told = os.path.join(str(node.config.rootpath), "crash-next")
    with open(told) as name:
        if name.read() == report.nodeid:
            wait_for("gw0 dead", lambda: dead(told + ".pid"), timeout=60)
            node.gateway._io.close_write()  # what execnet's receiver does once gw0's output ends
"""


def test_a_worker_gone_before_its_last_test_done_is_read_gets_no_more_work_and_the_run_ends(
    tmp_path: Path,
) -> None:
    """A worker crashed just after a test whose "done" the controller had not yet read; read then,
    it made the scheduler give that worker more work, sent on a closed channel: INTERNALERROR
    (OSError, cannot send), exit 3, seen once in a whole run under load."""
    (tmp_path / "test_late.py").write_text(textwrap.dedent(LATE_REPORT))
    (tmp_path / "conftest.py").write_text(textwrap.dedent(LATE_CONFTEST))
    done = run_suite(tmp_path, "-p", "no:cacheprovider", "-n", "1")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout[-3000:]
    assert "1 failed, 7 passed" in done.stdout, done.stdout[-3000:]
    assert "worker 'gw0' crashed while running 'test_late.py::test_one[" in done.stdout, done.stdout[-3000:]
    assert (tmp_path / "end-held").exists()  # the end of gw0's channel came after its "test done"


TWO_PAIRED = """
import pytest
from tests.support.waits import wait_for

def paired_started():
    import os
    with open(os.environ["SPANS"]) as spans:
        return any(line.startswith("start test_paired") for line in spans)

def test_long():
    # Runs while the other worker ends its short test: no paired test may start meanwhile.
    with pytest.raises(AssertionError, match="waited"):
        wait_for("a paired test", paired_started, timeout=3)

def test_short():
    pass

@pytest.mark.paired
@pytest.mark.parametrize("i", range(2))
def test_paired(i):
    pass
"""


def test_two_paired_tests_and_no_serial_one_never_run_beside_another_test(tmp_path: Path) -> None:
    """Two paired tests are two lane heads and no lane: the scheduler's first hand-out gave both
    heads and emptied the queue, so the base class stopped both workers and a head ran beside the
    other worker's long test (a review's simulation; ``pytest -n 2`` of one small file)."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_two.py").write_text(textwrap.dedent(TWO_PAIRED))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n    paired: two at once\n")
    done = run_suite(tmp_path, "-p", "no:cacheprovider", "-n", "2", spans=tmp_path / "spans")
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
