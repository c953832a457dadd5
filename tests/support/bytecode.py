"""Bytecode made once a run, before the workers start (a plugin the root conftest.py loads).

Where PYTHONDONTWRITEBYTECODE is set (as on the project's CI machines) Python reads ``.pyc`` files
but never writes them, so every worker and every dealer, co-dealer, witness and ``fairdeck``
subprocess compiled the project's modules from source again, and every worker rewrote the same
test modules' asserts. The controller now compiles the installed packages (``compileall``, whose
``.pyc`` the interpreter checks against the source's mtime and size) and writes pytest's rewritten
test modules and plugins (checked-hash ``.pyc``, the format pytest itself writes and checks; the
plugins include every module of the installed ones' packages, hypothesis and pytest-xdist, which
pytest rewrites too) before any worker starts. bench/README.md ("Bytecode made once a run").
Invariants: only a cache is written (``__pycache__`` folders: the tree's, which git ignores, and
the installed plugins'); a stale or missing entry is compiled again from source by whoever imports
it, so a failure here costs time, never a wrong result; a worker, or ``--collect-only``, writes
nothing.
"""

from __future__ import annotations

import compileall
import fnmatch
import importlib.util
import sys
from pathlib import Path

import pytest

PACKAGES = ("fairdeck", "fairdeck_server")
"""The project's installed packages, compiled where the interpreter imports them from."""
_ROOT = Path(__file__).resolve().parents[2]


def package_dirs() -> list[Path]:
    """Where each installed package's modules live (an editable install's build tree included)."""
    found: list[Path] = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.extend(Path(location) for location in spec.submodule_search_locations)
    return found


def rewritten_sources(config: pytest.Config) -> list[Path]:
    """The files pytest rewrites the asserts of: test modules (``python_files``), conftests, and
    the plugins the root conftest names."""
    patterns = config.getini("python_files")
    plugins = [_ROOT / "tests" / "support" / f"{name}.py" for name in ("fixtures", "parallel", "bytecode")]
    found = [_ROOT / "conftest.py", *plugins]
    for path in sorted((_ROOT / "tests").rglob("*.py")):
        if path.name == "conftest.py" or any(fnmatch.fnmatch(path.name, p) for p in patterns):
            found.append(path)
    return [path for path in found if path.is_file()]


def marked_sources(config: pytest.Config) -> list[Path]:
    """The files of the modules pytest marked for rewriting on import (``mark_rewrite``): the
    plugins named by the conftests, and every module of an installed plugin's distribution (all of
    hypothesis, all of pytest-xdist), a package with all its modules. A name whose parent package is
    not imported yet is left out, so that looking for it imports nothing."""
    try:
        from _pytest.assertion.rewrite import assertstate_key
    except ImportError:
        return []
    state = config.stash.get(assertstate_key, None)
    found: list[Path] = []
    for name in sorted(getattr(getattr(state, "hook", None), "_must_rewrite", ())):
        parent = name.rpartition(".")[0]
        if parent and parent not in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                found.extend(sorted(Path(folder).rglob("*.py")))
        elif spec.origin and spec.origin.endswith(".py"):
            found.append(Path(spec.origin))
    return found


def write_rewritten(config: pytest.Config, sources: list[Path]) -> int:
    """Writes pytest's rewritten ``.pyc`` for each source that lacks a current one; how many.
    pytest has no public call for this, so a pytest without these names is left to rewrite alone."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )
    except ImportError:
        return 0
    state = config.stash.get(assertstate_key, None)
    if state is None:  # --assert=plain: nothing is rewritten
        return 0
    written = 0
    for source in sources:
        cache = get_cache_dir(source)
        pyc = cache / (source.name[:-3] + PYC_TAIL)
        if _read_pyc(source, pyc) is not None:
            continue
        try:
            cache.mkdir(parents=True, exist_ok=True)  # parents: a PYTHONPYCACHEPREFIX tree
            source_hash, code = _rewrite_test(source, config)
        except (OSError, TypeError):
            # A read-only tree, or a pytest whose private calls changed shape: the workers rewrite
            # as they always did.
            return written
        except SyntaxError:
            continue  # the worker's own import reports it, with the test's name
        written += bool(_write_pyc(state, code, source_hash, pyc))
    return written


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """The packages in every run but a worker's (they are current after the first); the rewritten
    test modules in a parallel run's controller only, since a targeted ``-n 0`` run would pay for
    modules it never imports."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    for folder in [*package_dirs(), _ROOT / "tests" / "support"]:
        compileall.compile_dir(folder, quiet=2, workers=1)
    if getattr(config.option, "numprocesses", 0):
        sources = rewritten_sources(config)
        write_rewritten(config, sources + [path for path in marked_sources(config) if path not in sources])
