"""``lab collect`` under an operator's faults and a hostile source: a full disk, a path that is
not a directory, a directory that is not a collection, two collectors at once, and a source that
returns hands other than the ones asked for. Each ends in one line, no traceback, and leaves a
collection that resumes or was never started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fairdeck.cli import main
from fairdeck.lab import formats

FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from fairdeck.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_full_disk_is_one_line_naming_the_directory_and_the_collection_resumes(tmp_path: Path) -> None:
    out = tmp_path / "kit"
    argv = ["lab", "collect", "--out", str(out), "--raw-bytes", "300000", "--batch", "1000", "--no-progress"]
    run = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMIT, "150000", *argv], capture_output=True, text=True, check=False
    )
    err = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(err) == 1, run.stderr
    assert str(out) in err[0] and "dealer" not in err[0] and "run the same command again" in err[0]
    assert main(argv) == 0
    state = json.loads((out / "state.json").read_text())
    assert (out / formats.DECKS).stat().st_size == 52 * state["hands"]
    assert (out / formats.SEEDS).stat().st_size == 45 * state["hands"]
