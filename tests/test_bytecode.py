"""The controller of a parallel run writes the bytecode its workers and subprocesses would each
have compiled again (tests/support/bytecode.py): checked on files of a temporary folder."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc

from tests.support import bytecode

ROOT = Path(__file__).resolve().parent.parent


def test_a_test_module_gets_a_rewritten_pyc_that_pytest_reads_and_a_current_one_is_left_alone(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    source = tmp_path / "test_sample.py"
    source.write_text("def test_one():\n    x = 1\n    assert x == 2\n", encoding="utf-8")
    pyc = tmp_path / "__pycache__" / ("test_sample" + PYC_TAIL)

    assert bytecode.write_rewritten(pytestconfig, [source]) == 1
    code = _read_pyc(source, pyc)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(code, namespace)
    with pytest.raises(AssertionError, match=r"assert 1 == 2"):  # rewritten: it explains itself
        namespace["test_one"]()  # type: ignore[operator]
    assert bytecode.write_rewritten(pytestconfig, [source]) == 0

    source.write_text("def test_one():\n    assert True\n", encoding="utf-8")
    assert _read_pyc(source, pyc) is None  # pytest's own check: a changed source is rewritten again
    assert bytecode.write_rewritten(pytestconfig, [source]) == 1


def test_the_rewritten_sources_are_the_suites_test_modules_conftests_and_plugins(
    pytestconfig: pytest.Config,
) -> None:
    sources = set(bytecode.rewritten_sources(pytestconfig))
    assert Path(__file__).resolve() in sources
    assert ROOT / "conftest.py" in sources
    assert ROOT / "tests" / "support" / "fixtures.py" in sources
    assert ROOT / "tests" / "support" / "waits.py" not in sources  # imported plainly: compileall's


def test_the_compiled_packages_are_where_the_interpreter_imports_them_from() -> None:
    folders = bytecode.package_dirs()
    for name in bytecode.PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        assert Path(spec.origin).parent in folders


def test_a_folder_it_cannot_write_costs_nothing_but_time(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    source = tmp_path / "test_sample.py"
    source.write_text("def test_one():\n    assert True\n", encoding="utf-8")
    (tmp_path / "__pycache__").write_text("a file where the cache folder would be", encoding="utf-8")
    assert bytecode.write_rewritten(pytestconfig, [source]) == 0  # no error: the run goes on


def test_a_pytest_whose_private_calls_changed_shape_costs_nothing_but_time(
    tmp_path: Path, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _pytest.assertion.rewrite as rewrite

    source = tmp_path / "test_sample.py"
    source.write_text("def test_one():\n    assert True\n", encoding="utf-8")
    monkeypatch.setattr(rewrite, "_rewrite_test", lambda fn: None)  # one argument, not two
    assert bytecode.write_rewritten(pytestconfig, [source]) == 0  # no error: the run goes on


def test_the_installed_plugins_modules_that_pytest_rewrites_are_written_too(
    pytestconfig: pytest.Config,
) -> None:
    """pytest rewrites every module of an installed plugin's distribution (all of hypothesis, all of
    pytest-xdist: about 100 modules a run), and under PYTHONDONTWRITEBYTECODE never writes them: each
    worker of each run rewrote them all again, 1.4 to 1.5 s of CPU a worker."""
    import hypothesis
    import xdist.plugin

    marked = set(bytecode.marked_sources(pytestconfig))
    for module in (hypothesis, xdist.plugin):
        assert module.__file__ is not None and Path(module.__file__) in marked, module
    assert all(path.suffix == ".py" for path in marked)
