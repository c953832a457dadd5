"""A plain ``pytest`` runs in parallel, and its ``serial`` tests run last, alone, in one process
(tests/support/parallel.py): checked on a small suite of its own, run as the README runs ours."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUITE = """
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


def test_a_plain_run_is_parallel_and_runs_its_serial_tests_last_and_alone(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n")
    spans = tmp_path / "spans"
    env = {**os.environ, "SPANS": str(spans), "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.parallel", "-p", "no:cacheprovider"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line.split() for line in spans.read_text().splitlines()]
    assert len(lines) == 2 * 43
    workers = {worker for _, _, worker, _ in lines}
    assert len(workers) > 1 and "-" not in workers, workers  # parallel, in pytest-xdist's workers
    serial = [i for i, (_, name, _, _) in enumerate(lines) if name.startswith("test_alone")]
    assert min(serial) == len(lines) - 6, lines  # every other test ended before the first began
    assert len({lines[i][2] for i in serial}) == 1, lines  # one worker ran them
    assert [lines[i][0] for i in serial] == ["start", "end"] * 3, lines  # one after the other
