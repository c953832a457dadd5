"""The tests' own house: one support layer (helpers live only in tests/support, and no test module
imports another), one dealer fixture family (no folder or test module defines its own ``dealer``),
and test folders that follow the code (a server room, a client package, or a named cross-cutting
folder), each rule checked on sample sources first so that it can fail."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.source_tree import ROOT, python_files

# -- the tests' own house: one support layer, one dealer fixture family ----------------------------

SUPPORT = "tests/support/"
PLAIN_TEST_FILES = ("conftest.py", "__init__.py")
"""Besides test_*.py, the only Python files a test folder may hold (``__init__.py`` of
tests/examples puts examples/ on the path, as the scripts expect)."""


def imported_test_modules(source: str, module: str) -> list[str]:
    """The test modules (``test_*`` or ``conftest``) that ``module``'s source imports, anywhere in
    it (a lazy import inside a test counts), by dotted name."""
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            leaf = name.rsplit(".", 1)[-1]
            if name.startswith("tests.") and (leaf.startswith("test_") or leaf == "conftest"):
                found.append(name)
    return found


DEALER_FIXTURE = re.compile(r"^(dealer|\w+_dealer)$")


def dealer_fixtures(source: str) -> list[str]:
    """The fixtures ``source`` defines whose name is ``dealer`` or ends in ``_dealer`` (the
    function's name, or the ``name=`` it is registered under)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            if not ast.unparse(target).endswith("fixture"):
                continue
            named = [k.value.value for k in (call.keywords if call else []) if k.arg == "name"]
            name = str(named[0]) if named and isinstance(named[0], str) else node.name
            if DEALER_FIXTURE.match(name):
                found.append(name)
    return found


def files_under_tests() -> dict[str, Path]:
    """Every Python file under tests/, by path from the root."""
    return {
        p.relative_to(ROOT).as_posix(): p for p in python_files() if p.relative_to(ROOT).parts[0] == "tests"
    }


def test_the_support_rules_find_what_they_forbid() -> None:
    assert imported_test_modules("from tests.web.test_page import PROOFS\n", "tests.web.test_other") == [
        "tests.web.test_page"
    ]
    assert imported_test_modules("def f():\n    from .test_pool import x\n", "tests.codealer.test_a") == [
        "tests.codealer.test_pool"
    ]
    assert imported_test_modules("from tests.security import conftest\n", "tests.x.test_y") == [
        "tests.security.conftest"
    ]
    assert imported_test_modules("from tests.support.logs import audit\n", "tests.log.test_a") == []
    fixtures = (
        "@pytest.fixture\ndef dealer(): ...\n"
        "@pytest.fixture(scope='module')\ndef tls_dealer(): ...\n"
        "@fixture(name='mtls_dealer')\ndef other(): ...\n"
        "@pytest.fixture\ndef dealer_process(): ...\n"
        "def make_dealer(): ...\n"
    )
    assert dealer_fixtures(fixtures) == ["dealer", "tls_dealer", "mtls_dealer"]


def test_no_test_module_imports_another() -> None:
    """What two test modules share lives in tests/support: importing a test module runs its
    module-level code, collects nothing, and ties one test file's edits to another's imports."""
    found = {}
    for rel, path in files_under_tests().items():
        module = rel.removesuffix(".py").replace("/", ".")
        if imports := imported_test_modules(path.read_text(), module):
            found[rel] = imports
    assert found == {}, "move what they share into a tests/support module"


def test_helpers_live_only_in_tests_support() -> None:
    """A test folder holds test_*.py files, its conftest.py and __init__.py; every helper module is
    in tests/support, one module per job, so there is one place to look for it."""
    stray = [
        rel
        for rel in files_under_tests()
        if not rel.startswith(SUPPORT)
        and not Path(rel).name.startswith("test_")
        and Path(rel).name not in PLAIN_TEST_FILES
    ]
    assert stray == [], "move helper modules into tests/support"


def test_one_dealer_fixture_family() -> None:
    """Every dealer fixture comes from tests/support/fixtures.py (``dealer_factory`` and its
    family); a test module or folder conftest that needs a special dealer calls a factory with its
    options and names the result for what it is, never ``dealer`` or ``*_dealer``. Only the
    root conftest registers plugins (``pytest_plugins``)."""
    found = {
        rel: names
        for rel, path in files_under_tests().items()
        if not rel.startswith(SUPPORT) and (names := dealer_fixtures(path.read_text()))
    }
    assert found == {}, "use the dealer family of tests/support/fixtures.py"
    plugins = [
        rel
        for rel, path in files_under_tests().items()
        if rel != "tests/conftest.py" and re.search(r"^pytest_plugins\b", path.read_text(), re.M)
    ]
    assert plugins == []


# -- test folders follow the code ------------------------------------------------------------------

CROSS_CUTTING = ("deploy", "examples", "faults", "fuzz", "security", "support", "vectors")
"""Test folders that are no room nor package: they cut across the server and the client (faults,
fuzz, security, vectors), or test what ships beside the code (deploy, examples: the nginx rules
too), or help (support). The tiles' tests are no folder of their own: the server publishes them
(tests/publishing), the client writes and reads them (tests/log)."""
CATCH_ALL = ("server", "ops")
"""The folders the server's tests once shared, whatever room they tested."""


def stray_test_folders(folders: set[str], rooms: set[str], packages: set[str]) -> list[str]:
    """The test folders that are neither a server room, a client package, nor CROSS_CUTTING, and
    the catch-all folders, whatever else they are."""
    known = rooms | packages | set(CROSS_CUTTING)
    return sorted(f for f in folders if f not in known or f in CATCH_ALL)


def test_the_folder_rule_finds_a_stray_folder() -> None:
    rooms, packages = {"dealing", "edge", "server"}, {"core"}
    assert stray_test_folders({"dealing", "core", "faults"}, rooms, packages) == []
    found = stray_test_folders({"dealing", "misc", "ops", "server"}, rooms, packages)
    assert found == ["misc", "ops", "server"]


def test_test_folders_follow_the_server_rooms_and_the_client_packages() -> None:
    """Each server test lives in the folder of the room it tests (tests/dealing for
    fairdeck_server/dealing, ...), each client test in its package's, so the code's owner and its
    tests are found by the same name; tests/server and tests/ops, which held any room's, are gone."""
    rooms = {p.parent.name for p in (ROOT / "server" / "fairdeck_server").glob("*/__init__.py")}
    packages = {p.name for p in (ROOT / "client" / "fairdeck").iterdir() if p.is_dir() and p.name[0] != "_"}
    assert {"dealing", "edge", "storage"} <= rooms and {"core", "client", "web"} <= packages  # real names
    folders = {Path(rel).parts[1] for rel in files_under_tests() if len(Path(rel).parts) > 2}
    assert {"dealing", "core", "support"} <= folders
    assert stray_test_folders(folders, rooms, packages) == [], "name it for the room or package it tests"


# -- a module's marks: one pytestmark ----------------------------------------------------------------


def pytestmark_lines(source: str) -> list[int]:
    """The lines where ``source`` binds ``pytestmark`` at module level (``=``, ``: T =``)."""
    lines = []
    for node in ast.parse(source).body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            lines.append(node.lineno)
    return lines


def test_the_mark_rule_finds_a_second_pytestmark() -> None:
    source = 'pytestmark = pytest.mark.xdist_group("g")\nX = 1\npytestmark = [pytest.mark.slow]\n'
    assert pytestmark_lines(source) == [1, 3]
    inner = "pytestmark = [a, b]\ndef f():\n    pytestmark = 1\nS = 'pytestmark = 2'\n"
    assert pytestmark_lines(inner) == [1]
    assert pytestmark_lines("pytestmark: list[object] = []\npytestmark += [b]\n") == [1, 2]


def test_a_test_module_binds_pytestmark_once() -> None:
    """A second ``pytestmark =`` replaces the first's marks without a word: test_dealer_dump.py's
    ``xdist_group`` was lost that way, so its module fixture (a dealer and a co-dealer run, dealt
    and dumped) was built again on every worker that drew one of its tests. One list holds them all."""
    found = {
        rel: lines
        for rel, path in files_under_tests().items()
        if len(lines := pytestmark_lines(path.read_text())) > 1
    }
    assert found == {}, "put every mark of the module in one pytestmark list"
