"""tests/support/forked_serve: a forking process that cannot start, or that printed anything while
it imported, fails the test that made it, with the reason and no log left behind; a fresh
`fairdeck` would have printed the same lines, which the one-line refusal checks count. A forked
start has the caller's umask, as a fresh one would."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
