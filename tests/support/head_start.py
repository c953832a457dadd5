"""Installs the Node.js packages a run's tests need while its workers start and collect (a plugin
the root conftest.py loads), rather than in the first test that needs them.

`npm ci` took a worker's first minutes in a fresh checkout while the other workers, their first
tests in a browser too, waited on its lock. The run's controller (or a ``-n 0`` run's only process)
now begins it in a thread before collection, where the command line covers the tests that need it
(``NEEDS``) and selects no subset by name or mark (``-k``, ``-m``) that may not need it at all.
Invariants: the install and its outcome are those of ``browser.npm_ci``, whose lock every process
of the run waits on; an install still under way when the run ends is stopped, and a node_modules
that was there put back as it was, before the process exits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import browser

_ROOT = Path(__file__).resolve().parents[2]
NEEDS = {
    "tests/web": (browser.WEB,),
    "tests/examples": (browser.WEB, _ROOT / "examples" / "node"),
}
"""The folders whose tests run `npm ci`, and the prefixes each needs (in the order to install)."""
_STARTED = pytest.StashKey[browser.HeadStart]()


def prefixes_for(args: list[str], invoked: Path) -> list[Path]:
    """The prefixes that the run's paths (its arguments, or pytest's ``testpaths``) need."""
    wanted: list[Path] = []
    for arg in args:
        path = (invoked / arg.split("::", 1)[0]).resolve()
        for folder, prefixes in NEEDS.items():
            needs = _ROOT / folder
            if needs == path or needs.is_relative_to(path) or path.is_relative_to(needs):
                wanted += [prefix for prefix in prefixes if prefix not in wanted]
    return wanted


@pytest.hookimpl(trylast=True)  # after pytest-xdist's and parallel.py's: their options are final
def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    if hasattr(config, "workerinput") or option.collectonly or option.keyword or option.markexpr:
        return
    started = browser.head_start(prefixes_for(config.args, config.invocation_params.dir))
    if started is not None:
        config.stash[_STARTED] = started


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_STARTED, None)
    if started is not None:
        started.stop()
