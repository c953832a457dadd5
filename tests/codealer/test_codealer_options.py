"""``fairdeck codealer serve``'s bounded options: a value out of range is refused in one line
that names the option and its range, exit 2, no traceback, before anything is opened.
``--reveal-hold 0`` among them: a hand whose seats never release it could never be voided."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.codealers import init_codealer
from tests.support.env import clean_env

SERVE = (sys.executable, "-m", "fairdeck.cli", "codealer", "serve")
SECONDS = "from 1 to 63072000 seconds"
DAYS = "0 (keep every hand) or from 1 to 36500 days"
CASES = [
    *(("--max-hand-lifetime", v, SECONDS) for v in ("0", "0.5", "63072001", "nan")),
    *(("--reveal-hold", v, SECONDS) for v in ("0", "0.5", "63072001", "nan")),
    *(
        ("--keep-closed-days", v, "0 (keep every hand) or from 1 to 36500 days")
        for v in ("0.5", "36501", "nan", "-1")
    ),
    *((option, "x", "") for option in ("--max-hand-lifetime", "--reveal-hold", "--keep-closed-days")),
]


@pytest.mark.parametrize(("option", "value", "says"), CASES)
def test_an_option_out_of_range_is_one_line(tmp_path: Path, option: str, value: str, says: str) -> None:
    init_codealer(tmp_path / "cd1")
    out = subprocess.run(
        [*SERVE, "--dir", str(tmp_path / "cd1"), "--listen", "127.0.0.1:0", option, value],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    (error,) = [line for line in out.stderr.splitlines() if "error:" in line]
    assert option in error and says in error, error
