"""``fairdeck stats``'s progress bar: tqdm's, with the time left and the decks per
second, on a terminal only; never on a pipe, never beside ``--json``, never with ``--no-progress``.

The real console script runs in a process of its own with its stderr on a pseudo-terminal
(tests/support/ttys.py) or not, forked from one that imported it and the statistics once
(tests/support/forked_cli.py: a process's start and imports were half a case's CPU); a small run
(2,000 decks, no controls) keeps each in seconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("numpy")
pytest.importorskip("scipy")
pytest.importorskip("matplotlib")

from tests.support.forked_cli import PRELOAD, ForkedCli
from tests.support.ttys import fairdeck_on_pipes, fairdeck_on_pty

# tqdm's "[elapsed<remaining, ...]": the time taken and the time left, then our rate in decks.
ETA_AND_RATE = re.compile(r"\[\d\d:\d\d<\d\d:\d\d, [\d,]+ decks/s, ours\]")


@pytest.fixture(scope="module")
def forked() -> Iterator[ForkedCli]:
    runner = ForkedCli((*PRELOAD, "fairdeck.cli.stats_run", "matplotlib.pyplot", "tqdm"))
    yield runner
    runner.close()


def stats_args(out: Path, *extra: str) -> list[str]:
    return ["stats", "-n", "2000", "--controls", "none", "--workers", "1", "--out", str(out), *extra]


def test_stats_on_a_terminal_shows_time_left_and_rate(tmp_path: Path, forked: ForkedCli) -> None:
    run = fairdeck_on_pty(*stats_args(tmp_path), forked=forked)
    assert run.returncode == 0, run.terminal
    last = run.terminal.split("\r")[-2]  # the final redraw; the bar's line then ends with \r\n
    assert last.startswith("stats: 100%"), run.terminal
    assert ETA_AND_RATE.search(last), last
    assert run.terminal.endswith("\r\n")
    assert run.stdout.startswith("fairdeck stats: 2,000 standard decks")
    assert "\r" not in run.stdout and "decks/s" not in run.stdout


def test_stats_draws_nothing_on_a_pipe(tmp_path: Path, forked: ForkedCli) -> None:
    run = fairdeck_on_pipes(*stats_args(tmp_path), forked=forked)
    assert run.returncode == 0, run.terminal
    assert run.terminal == ""


@pytest.mark.parametrize("flag", ["--json", "--no-progress"])
def test_stats_json_or_no_progress_on_a_terminal_draws_nothing(
    tmp_path: Path, flag: str, forked: ForkedCli
) -> None:
    run = fairdeck_on_pty(*stats_args(tmp_path, flag), forked=forked)
    assert run.returncode == 0, run.terminal
    assert run.terminal == ""
    if flag == "--json":
        assert json.loads(run.stdout)["ok"] is True
