"""client/web's own test runner (``npm test``: ``node --test`` on the files its package.json names)
once a test session, its lines shared. Its codeal.test.mjs computes the line of every co-dealt
vector on Node (the section 10 records, the format 4 hand proofs through both doors, the seal
cases) and, given FAIRDECK_NODE_RESULTS, writes them as JSON: the tests that hold them to the
Python reference read them here instead of running the same checks in another node process.
Invariants: one run for each content of client/web's package.json, src/ and test/ and of
docs/vectors/ (a later run in the session, on any xdist worker, reads the first's answer through a
file lock); a run that ended, failed or not, is kept as it ended; one that timed out keeps nothing,
and the next asker runs it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support import browser


@dataclass(frozen=True)
class PackageRun:
    """How ``npm test`` ended, and the lines it wrote (None where it wrote none)."""

    returncode: int
    output: str
    results: dict[str, Any] | None

    def lines(self, part: str) -> Any:
        """One part of the lines (codeal, proofs, seals); a test fails, saying why, without them."""
        if self.results is None:
            pytest.fail(f"node --test wrote no lines (exit {self.returncode}):\n{self.output[-3000:]}")
        return self.results[part]


def _content_key() -> str:
    """SHA-256 of every file the run reads: client/web's package.json (which names the test files),
    src/ and test/, and docs/vectors/."""
    digest = hashlib.sha256((browser.WEB / "package.json").read_bytes())
    for folder in (browser.WEB / "src", browser.WEB / "test", browser.VECTORS):
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                digest.update(str(path.relative_to(browser.ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def npm_test_command() -> list[str]:
    """``npm test``'s command, from client/web's package.json: ``node --test`` and its files (all of
    them: a file added there is run here too, not only by hand)."""
    script = json.loads((browser.WEB / "package.json").read_text(encoding="utf-8"))["scripts"]["test"]
    command = script.split()
    assert command[:2] == ["node", "--test"] and len(command) > 2, script
    return command


def package_run(factory: pytest.TempPathFactory) -> PackageRun:
    """``npm test``'s ``node --test`` in client/web, once a session (see the module's text)."""
    browser.require(browser.node_missing())
    base = factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "node-runs"
    shared.mkdir(exist_ok=True)
    key = _content_key()
    done = shared / f"{key}.json"
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.is_file():
            lines = shared / f"{key}.lines.json"
            lines.unlink(missing_ok=True)
            ran = subprocess.run(
                npm_test_command(),
                cwd=browser.WEB,
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "FAIRDECK_NODE_RESULTS": str(lines)},
            )
            results = json.loads(lines.read_text(encoding="utf-8")) if lines.is_file() else None
            answer = {"returncode": ran.returncode, "output": ran.stdout + ran.stderr, "results": results}
            part = shared / f"{key}.part"
            part.write_text(json.dumps(answer), encoding="utf-8")
            part.rename(done)
        kept = json.loads(done.read_text(encoding="utf-8"))
    return PackageRun(kept["returncode"], kept["output"], kept["results"])
