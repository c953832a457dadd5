"""Run rules for the whole tree: how many processes, and what is collected.

A plain ``pytest`` runs in several processes, the longest tests first and the tests marked
``serial`` last and alone (tests/support/parallel.py, a plugin loaded here); ``-n 0`` or
``-p no:xdist`` runs all in one. ``npm ci`` begins before collection (tests/support/head_start.py).

The co-dealt mode's code and tests need the system's libsodium (docs/codealing-spec.md section 14),
which a fresh machine with only Python may lack. There they are not collected, and one line at the
end of the run says so and how to get it; with CI_REQUIRE_LIBSODIUM=1 (as .ci/run sets) they are
collected all the same, so a missing libsodium fails the run instead of skipping a feature.
"""

from __future__ import annotations

import ctypes.util
import os
from pathlib import Path

import pytest

REQUIRE = "CI_REQUIRE_LIBSODIUM"
NEEDS_LIBSODIUM = (
    "client/fairdeck/codeal",
    "tests/codeal",
    "tests/codealer",
    "tests/faults/test_codeal_claims.py",
    "tests/support/codeal_hands.py",
    "tests/support/codeal_pool.py",
    "tests/support/codeal_seal_vectors.py",
    "tests/support/codeal_vectors.py",
    "tests/support/held_hands.py",
    "tests/web/test_codeal_web.py",
    "tests/web/test_codeal_proofs_web.py",
    "tests/web/test_codeal_seal_web.py",
    "tests/web/test_codeal_page_release.py",
    "client/fairdeck/client/codeal_seat.py",
    "server/fairdeck_server/dealing/codeal_dealing.py",
    "server/fairdeck_server/dealing/codeal_log.py",
    "server/fairdeck_server/dealing/codeal_seals.py",
    "server/fairdeck_server/dealing/codeal_voids.py",
    "server/fairdeck_server/codealer/holder.py",
    "server/fairdeck_server/edge/codealer_servicer.py",
)
"""Paths, from the repository's root, whose modules import fairdeck.codeal at import time."""
_ROOT = Path(__file__).resolve().parent
_MISSING = ctypes.util.find_library("sodium") is None and os.environ.get(REQUIRE) != "1"
_left_out: set[str] = set()
pytest_plugins = (
    "tests.support.parallel",
    "tests.support.bytecode",
    "tests.support.lineless",
    "tests.support.head_start",
)


def libsodium_left_out() -> bool:
    """Whether the co-dealt mode's code is left out of this run (for tests that import it)."""
    return _MISSING


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if not _MISSING:
        return None
    try:
        relative = collection_path.resolve().relative_to(_ROOT).as_posix()
    except ValueError:
        return None
    for prefix in NEEDS_LIBSODIUM:
        if relative == prefix or relative.startswith(prefix + "/"):
            _left_out.add(prefix)
            return True
    return None


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker hands what it left out to the controller, which writes the line at the end."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["libsodium_left_out"] = sorted(_left_out)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:  # pytest-xdist's, on the controller
    _left_out.update(getattr(node, "workeroutput", {}).get("libsodium_left_out", ()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _left_out:
        terminalreporter.write_line(
            f"not run, libsodium is not installed: {', '.join(sorted(_left_out))} (the co-dealt mode); "
            "install it (Debian/Ubuntu: apt-get install libsodium23; macOS: brew install libsodium)"
        )
