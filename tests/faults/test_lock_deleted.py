"""The data dir's lock file deleted or replaced under a live dealer: no second dealer starts on the
same data dir (it would say SERVING and fail every write), whether one process or a
``serve --processes`` group holds it, and ``fairdeck init`` is refused there too. The exclusion
is a lock on the directory itself, which no file operation undoes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.faults.kit import FaultRun
from tests.support.env import clean_env


def second_refused(run: FaultRun) -> None:
    stderr = run.start_refused()
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    assert f"data dir {run.data_dir} is in use by another dealer" in stderr, stderr


@pytest.mark.parametrize("processes", [1, 2])
def test_deleting_the_lock_file_does_not_let_a_second_dealer_in(run: FaultRun, processes: int) -> None:
    dealer = run.start(*(("--processes", str(processes)) if processes > 1 else ()))
    run.ledger.deal(dealer.target, 2)
    (run.data_dir / "fairdeck.lock").unlink()
    second_refused(run)
    (run.data_dir / "fairdeck.lock").write_text("1\n")  # replaced by another file, not locked by anyone
    second_refused(run)
    init = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "init", "--data", str(run.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert init.returncode == 2 and "Traceback" not in init.stderr, init
    run.ledger.deal(dealer.target, 2)  # the first dealer writes on, untouched
