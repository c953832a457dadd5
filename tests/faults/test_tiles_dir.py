"""``serve --tiles DIR`` where DIR cannot be written: the dealer refuses to start in one line naming
DIR, whatever the log holds: an empty log (nothing to write yet) does not let it serve and then
sign no checkpoint at all, its hands unprovable, with INFO lines five times a second."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.faults import WITHOUT_DAC, FaultRun


def refused_naming(stderr: str, tiles: Path) -> None:
    assert "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"fairdeck serve: --tiles {tiles}: cannot write the tiles there: "), stderr


def test_a_read_only_tiles_dir_is_refused_at_start_even_for_an_empty_log(run: FaultRun) -> None:
    run.start().terminate()  # a new log, no entry yet: nothing to write at start
    tiles = run.tmp / "tiles"
    tiles.mkdir(mode=0o555)
    try:
        refused_naming(run.start_refused("--tiles", str(tiles), wrap=WITHOUT_DAC), tiles)
    finally:
        os.chmod(tiles, 0o755)
