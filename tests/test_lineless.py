"""A test that fails through a frame with no line number is reported as failed, and the run goes
on (tests/support/lineless.py); without the plugin pytest itself stops with an INTERNALERROR."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = """
import types


def _raiser():
    raise ValueError("the failure itself")


def test_fails_in_a_frame_with_no_line_number():
    types.FunctionType(_raiser.__code__.replace(co_linetable=b""), globals())()


def test_after_it():
    pass
"""


def _run(tmp_path: Path, *plugins: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_case.py").write_text(CASE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
    ]
    for plugin in plugins:
        argv += ["-p", plugin]
    return subprocess.run(
        [*argv, "-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_case.py")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_failure_through_a_frame_with_no_line_number_is_reported_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    out = _run(tmp_path, "tests.support.lineless")
    assert "INTERNALERROR" not in out.stdout + out.stderr, out.stdout[-2000:]
    assert "1 failed, 1 passed" in out.stdout, out.stdout[-2000:]
    assert "ValueError: the failure itself" in out.stdout
    assert out.returncode == 1


def test_without_the_plugin_pytest_stops_on_it(tmp_path: Path) -> None:
    """The case is real: pytest as it is cannot report it (if a later pytest can, the plugin can go)."""
    out = _run(tmp_path)
    assert "INTERNALERROR" in out.stdout + out.stderr
    assert out.returncode == 3
