"""tests/support/forked_serve: a forking process that cannot start, or that printed anything while
it imported, fails the test that made it, with the reason and no log left behind; a fresh
`fairdeck` would have printed the same lines, which the one-line refusal checks count. A forked
start has the caller's umask, as a fresh one would."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.support import forked_serve
from tests.support.codealers import CodealerProcess
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker


def logs() -> set[Path]:
    return set(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"serve-forker-{os.getpid()}-*.log"))


def test_a_preload_that_fails_to_import_is_said_with_its_reason() -> None:
    before = logs()
    with pytest.raises(AssertionError, match=r"(?s)did not start.*no_such_module_for_the_forker"):
        ServeForker(("no_such_module_for_the_forker",))
    assert logs() == before


def test_a_warning_printed_at_import_fails_the_forker_as_it_would_a_one_line_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "warns_at_import.py").write_text(
        "import warnings\nwarnings.warn('a dependency warned at import')\n"
    )
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    )
    before = logs()
    with pytest.raises(AssertionError, match=r"(?s)printed at import.*a dependency warned at import"):
        ServeForker(("warns_at_import",))
    assert logs() == before


def test_a_forked_start_has_the_callers_umask_not_the_forking_processs(tmp_path: Path) -> None:
    """A forked start inherited the forking process's umask, set when it was made: a test that
    loosens the umask (files a fresh `fairdeck` would make 0644) saw the forker's instead."""
    old = os.umask(0o077)  # the forker is made under one umask; the caller's changes after
    forker = ServeForker()
    try:
        for umask in (0o022, 0o027):
            os.umask(umask)
            log = tmp_path / f"dealer-{umask:o}.log"
            with DealerProcess(tmp_path / "data", log, forker=forker) as dealer:
                assert umask_of(dealer.pid) == umask
    finally:
        os.umask(old)
        forker.close()


def umask_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Umask:")).split()[1], 8)


HOLDS_STDOUT = """\
import atexit, os, subprocess, sys
FORKER = os.getpid()
def leave_a_holder():
    if os.getpid() != FORKER:  # a forked start's exit, never the forking process's own
        holder = [sys.executable, "-c", "import signal; signal.pause()"]
        held = subprocess.Popen(holder, stdin=subprocess.DEVNULL)
        with open({pid_file!r}, "w") as f:
            f.write(str(held.pid))
atexit.register(leave_a_holder)
"""
"""A preload whose every forked start leaves, as it exits, a process holding its stdout open."""


def test_a_run_whose_stdout_a_left_process_holds_fails_saying_so_not_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` read the start's stdout to its end with no bound: a process the start left behind
    holding the pipe (a grandchild) hung the test for ever, past its own timeout."""
    pid_file = tmp_path / "holder.pid"
    (tmp_path / "holds_stdout.py").write_text(HOLDS_STDOUT.format(pid_file=str(pid_file)))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.setattr(forked_serve, "STDOUT_AFTER_EXIT_S", 0.5)
    forker = ServeForker(("fairdeck.cli.dispatch", "holds_stdout"))
    try:
        with pytest.raises(AssertionError, match=r"exited \(0\) but its stdout was still open 0.5 s later"):
            forker.run(["--help"], timeout=60)
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        forker.close()
    assert pid_file.exists()  # the holder was there


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def test_a_forker_that_cannot_start_leaves_no_descriptor_open() -> None:
    """Its socket to the forking process stayed open after the failure (while the failure lived)."""
    before = open_fds()
    with pytest.raises(AssertionError, match="did not start") as failed:
        ServeForker(("no_such_module_for_the_forker",))
    assert open_fds() <= before, failed.value


def test_a_start_the_forking_process_cannot_answer_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """The read end of a start's stdout pipe stayed open for ever when the start failed, and so did a
    co-dealer's log file when its start did."""
    forker = ServeForker()
    try:
        forker._proc.kill()  # the forking process gone: no start can be answered
        forker._proc.wait()
        before = open_fds()
        with open(tmp_path / "stderr", "w") as stderr, pytest.raises((AssertionError, OSError)):
            forker.start(["--help"], stderr)
        assert open_fds() <= before
        with pytest.raises((AssertionError, OSError)) as failed:
            CodealerProcess(tmp_path / "cd", forker=forker)
        assert open_fds() <= before, failed.value
    finally:
        forker.close()
