"""What the console script loads: ``fairdeck`` run as its entry point runs it, in a fresh
interpreter, its output discarded; the modules it loaded come back. Shared by the import-rule
tests (tests/test_boundaries.py) and the command table's (tests/cli/test_dispatch.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.source_tree import ROOT

RUN_CLI = """
import contextlib, io, json, sys
from fairdeck.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
print(json.dumps([code, sorted(sys.modules)]))
"""


def loaded_by(*argv: str) -> set[str]:
    """The modules ``fairdeck ARGV...`` loaded; the command must exit 0."""
    out = subprocess.run(
        [sys.executable, "-c", RUN_CLI, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    code, modules = json.loads(out.stdout.splitlines()[-1])
    assert code in (0, None), (argv, code)
    return set(modules)
