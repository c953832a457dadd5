"""``fairdeck codealer serve``'s bounded options: a value out of range is refused in one line
that names the option and its range, exit 2, no traceback, before anything is opened.
``--reveal-hold 0`` among them: a hand whose seats never release it could never be voided."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.logs import fairdeck

SERVE = ("codealer", "serve")
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
    """Through the console script's own ``main`` in this process (a child interpreter per case
    cost more than the parse). ``--dir`` names no co-dealer: a value let through would be refused
    for the dir instead (exit 2 too, but no ``error:`` line naming the option), never served."""
    out = fairdeck(*SERVE, "--dir", str(tmp_path / "none"), "--listen", "127.0.0.1:0", option, value)
    assert out.rc == 2 and "Traceback" not in out.err, out.err
    (error,) = [line for line in out.err.splitlines() if "error:" in line]
    assert option in error and says in error, error
