"""``fairdeck audit``'s progress bar: tqdm's, with the rate and the time left, on a
terminal only; never on a pipe, never beside ``--json``, never with ``--no-progress``.

The real console script runs in a subprocess, its stderr on a pseudo-terminal (tests/support/ttys.py)
or on a pipe, over the real log of tests/support/logs.py.
"""

from __future__ import annotations

import re

from tests.support.logs import BuiltLog, verifier_key
from tests.support.ttys import fairdeck_on_pipes, fairdeck_on_pty

# tqdm's "[elapsed<remaining, rate]": the time taken, the time left, and entries per second.
RATE_AND_ETA = re.compile(r"\[\d\d:\d\d<\d\d:\d\d, [\d.,]+ ?entries/s\]")


def audit_args(built_log: BuiltLog, *extra: str) -> list[str]:
    return ["audit", "--data", str(built_log.data_dir), "--key", verifier_key(built_log.data_dir), *extra]


def test_audit_on_a_terminal_shows_rate_and_time_left(built_log: BuiltLog) -> None:
    run = fairdeck_on_pty(*audit_args(built_log))
    assert run.returncode == 0, run.terminal
    last = run.terminal.split("\r")[-2]  # the final redraw; the bar's line then ends with \r\n
    assert last.startswith("audit: 100%"), run.terminal
    assert f"{built_log.entries}/{built_log.entries} " in last
    assert RATE_AND_ETA.search(last), last
    assert run.terminal.endswith("\r\n"), "the bar's line is ended before anything else is printed"
    # The report itself, on stdout, carries none of it.
    assert run.stdout.startswith(f"audit OK: {built_log.entries:,} entries")
    assert "\r" not in run.stdout and "entries/s" not in run.stdout


def test_audit_draws_nothing_on_a_pipe(built_log: BuiltLog) -> None:
    run = fairdeck_on_pipes(*audit_args(built_log))
    assert run.returncode == 0, run.terminal
    assert run.terminal == ""
    assert run.stdout.startswith(f"audit OK: {built_log.entries:,} entries")


def test_audit_json_on_a_terminal_is_never_mixed_with_a_bar(built_log: BuiltLog) -> None:
    run = fairdeck_on_pty(*audit_args(built_log, "--json"))
    assert run.returncode == 0, run.terminal
    assert run.terminal == ""
    assert run.stdout.lstrip().startswith("{") and '"ok": true' in run.stdout


def test_audit_no_progress_on_a_terminal_draws_nothing(built_log: BuiltLog) -> None:
    run = fairdeck_on_pty(*audit_args(built_log, "--no-progress"))
    assert run.returncode == 0, run.terminal
    assert run.terminal == ""


def test_audit_progress_asked_for_draws_on_a_pipe_too(built_log: BuiltLog) -> None:
    """``--progress`` is the user's choice over the terminal test (a CI log that wants to see it)."""
    run = fairdeck_on_pipes(*audit_args(built_log, "--progress"))
    assert run.returncode == 0, run.terminal
    assert RATE_AND_ETA.search(run.terminal), run.terminal
    assert "entries/s" not in run.stdout
