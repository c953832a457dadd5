"""The shape of the house as tests: no import cycle in either package, at module or package
level; gRPC only at the server's edge; no module name shared by the client and the server; no
hand-written Python module over 600 lines; module docstrings of at most 15 lines; and no issue
numbers in the code, which a reader of it cannot follow.

The import graph is read from the source with ``ast``: every import statement, those inside
functions and under ``if TYPE_CHECKING`` included, so a lazy import cannot hide a cycle.
``from package import name`` is an edge to ``package.name`` when that is a module, else to
``package``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"fairdeck": ROOT / "client" / "fairdeck", "fairdeck_server": ROOT / "server" / "fairdeck_server"}
GENERATED = ("fairdeck.v1",)
MAX_LINES = 600


def module_files() -> dict[str, Path]:
    """Every hand-written module of both packages: dotted name -> file."""
    out = {}
    for top, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join([top, *parts]).removesuffix(".__init__")
            if not any(name == g or name.startswith(g + ".") for g in GENERATED):
                out[name] = path
    return out


MODULES = module_files()


def parse(path: Path) -> ast.Module:
    """``path``'s syntax tree. CPython 3.11 keeps the AST builder's recursion count per
    interpreter, not per thread: a traceback formatted in another thread at the same moment (3.11's
    traceback module parses source lines for its carets) can make ``ast.parse`` raise SystemError
    "AST constructor recursion depth mismatch" (seen once in a full CI run, beside a storage test's
    leaked tasks logging tracebacks). That error says nothing of the file: parse it again."""
    try:
        return ast.parse(path.read_text(), filename=str(path))
    except SystemError as e:
        if "recursion depth mismatch" not in str(e):
            raise
        return ast.parse(path.read_text(), filename=str(path))


def imported(name: str, path: Path) -> Iterator[str]:
    """The modules of ours that ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # `import a.b.c` of ours names a.b.c or a package above
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def graph() -> dict[str, set[str]]:
    return {name: set(imported(name, path)) for name, path in MODULES.items()}


def room(module: str) -> str:
    """A module's room: its subpackage (``fairdeck.log``, ``fairdeck_server.storage``), or the
    module itself when it sits at the top of its package."""
    top, _, rest = module.partition(".")
    if not rest:
        return module
    first = rest.split(".")[0]
    return f"{top}.{first}"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    """The rule is about real edges: a few that must be there."""
    edges = graph()
    assert "fairdeck_server.edge.status" in edges["fairdeck_server.edge.dealer_servicer"]
    assert "fairdeck_server.storage.sqlite.writer" in edges["fairdeck_server.storage.sqlite.engine"]
    assert "fairdeck.core.commitment" in edges["fairdeck.core.local"]


def test_no_import_cycle_between_modules() -> None:
    assert cycles(graph()) == []


def test_no_import_cycle_between_rooms() -> None:
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph().items():
        rooms[room(module)] |= {room(t) for t in targets} - {room(module)}
    assert cycles(rooms) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# -- gRPC stays at the edge ------------------------------------------------------------------------

GRPC = ("grpc", "grpc_health", "grpc_reflection", "grpc_status")
EDGE = ("fairdeck_server.edge", "fairdeck_server.app")


def third_party_imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def test_only_the_edge_and_app_import_grpc() -> None:
    server = {n: p for n, p in MODULES.items() if n.startswith("fairdeck_server")}
    assert {"fairdeck_server.dealer", "fairdeck_server.limits", "fairdeck_server.vault"} <= set(server)
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {m}"
        for name, path in server.items()
        if not any(name == e or name.startswith(e + ".") for e in EDGE)
        for line, m in third_party_imports(path)
        if m.split(".")[0] in GRPC
    ]
    assert bad == []


def test_the_rules_storage_and_signing_load_no_grpc() -> None:
    """At run time too, through every module they pull in: the dealer, storage (both engines),
    the vault, the limits, auth and metrics policies, and the log signer."""
    code = (
        "import sys, json\n"
        "import fairdeck_server.dealer, fairdeck_server.storage.sqlite, fairdeck_server.vault\n"
        "import fairdeck_server.limits, fairdeck_server.auth, fairdeck_server.metrics\n"
        "import fairdeck_server.log_signing, fairdeck_server.cosigning, fairdeck_server.startup\n"
        "import fairdeck_server.storage.postgres\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(__import__("json").loads(out.stdout))
    assert "fairdeck_server.storage.sqlite.writer" in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in GRPC) == []


# -- names and sizes -------------------------------------------------------------------------------


def test_no_module_name_is_shared_by_the_client_and_the_server() -> None:
    names: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            names[path.stem].add(name.split(".")[0])
    assert sorted(stem for stem, tops in names.items() if len(tops) > 1) == []


def test_no_tracked_file_is_ignored() -> None:
    """What is committed is not also ignored (bench/results/ was both: 55 files tracked under an
    ignore rule), so the tree says plainly what belongs to it."""
    both = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert both == []


def python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / f for f in listed if not f.startswith("client/fairdeck/v1/") and (ROOT / f).is_file()]


@pytest.mark.parametrize("limit", [MAX_LINES])
def test_no_hand_written_module_is_over_600_lines(limit: int) -> None:
    files = python_files()
    assert len(files) > 100
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > limit}
    assert long == {}


# -- docstrings and references ---------------------------------------------------------------------

MAX_DOCSTRING_LINES = 15
"""Of prose: the lines before a docstring's first doctest example (``>>>``), which is a runnable
example rather than explanation, and runs in the suite."""
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")
ISSUE_SCOPE = ("client/", "server/", "tests/", "bench/", "examples/")
N = 15


def docstring_lines(source: str) -> int:
    """How many lines of the file the module docstring's prose spans, quotes included, up to its
    first doctest example; 0 without one."""
    tree = ast.parse(source)
    if ast.get_docstring(tree) is None:
        return 0
    first = tree.body[0]
    spanned = source.splitlines()[first.lineno - 1 : first.end_lineno or first.lineno]
    prose = next((i for i, line in enumerate(spanned) if line.lstrip().startswith(">>>")), len(spanned))
    return prose


def long_docstrings() -> dict[str, int]:
    """Every hand-written module of both packages whose docstring is over the limit."""
    spans = {str(path.relative_to(ROOT)): docstring_lines(path.read_text()) for path in MODULES.values()}
    return {path: n for path, n in spans.items() if n > MAX_DOCSTRING_LINES}


def issue_numbers() -> dict[str, list[str]]:
    """Every Python file we write that mentions an issue number, with what it says."""
    found = {}
    for path in python_files():
        rel = str(path.relative_to(ROOT))
        if rel.startswith(ISSUE_SCOPE) and (hits := ISSUE_NUMBER.findall(path.read_text())):
            found[rel] = hits
    return found


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ('"""One line."""\n', 1),
        ('"""Summary.\n\nMore.\n"""\n', 4),
        ('"""' + "x\n" * 15 + '"""\n', 16),
        ("import os\n", 0),
        ('"""Summary.\n\n>>> 1 + 1\n2\n"""\n', 2),
        ('from __future__ import annotations\n"""Not a docstring."""\n', 0),
    ],
)
def test_docstring_lines_counts_the_lines_the_docstring_spans(source: str, lines: int) -> None:
    assert docstring_lines(source) == lines


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        (f"(issue {N})", True),  # spelt with N, so this file does not mention one itself
        (f"Issue {N}, bar 1", True),
        (f"issues {N} and {N + 1}", True),
        (f"see issue #{N}", True),
        ("tokens ever issued", False),
        ("tissue 5", False),
        ("an issue with the lock", False),
    ],
)
def test_the_issue_pattern_finds_issue_numbers_only(text: str, hit: bool) -> None:
    assert bool(ISSUE_NUMBER.search(text)) is hit


def test_module_docstrings_are_at_most_15_lines() -> None:
    """A module docstring says what the module owns and its invariants; essays go in docs/."""
    long = long_docstrings()
    assert long == {}, "move the essay to docs/ and leave a pointer"


def test_no_issue_numbers_in_the_code() -> None:
    """Say what an issue said (the bug, the bar) or point at docs/ or bench/README.md instead."""
    found = issue_numbers()
    assert found == {}


# -- no fixed waits in the tests -------------------------------------------------------------------

WAITS = "tests/support/waits.py"
"""The one module of the tests that may sleep: its poll (``wait_for``) and its named stretches of
time under test (``hold_silent``, ``outlast``, ``pace``)."""
CLOCK_MODULES = {"time", "asyncio"}


def fixed_sleeps(source: str) -> list[int]:
    """The lines of ``source`` that sleep (``time.sleep``, ``asyncio.sleep``, called, passed on or
    imported by name, under any alias), whatever the argument; ``asyncio.sleep(0)``, one turn of
    the event loop that waits on no clock, excepted."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # name bound here -> clock module
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name: a.name for a in node.names if a.name in CLOCK_MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in CLOCK_MODULES:
            hits += [node.lineno for a in node.names if a.name == "sleep"]
    turns = {
        id(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and [ast.dump(a) for a in node.args] == [ast.dump(ast.Constant(0))]
        and not node.keywords
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "sleep"
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and not (id(node) in turns and modules[node.value.id] == "asyncio")
        ):
            hits.append(node.lineno)
    return sorted(hits)


def test_fixed_sleeps_are_found() -> None:
    """The checker itself: what it must refuse and what it must let pass."""
    refused = [
        "import time\ntime.sleep(0.1)\n",
        "import asyncio\nasync def f():\n    await asyncio.sleep(0.5)\n",
        "import time\nwhile not done():\n    time.sleep(0.05)\n",  # a poll of its own: use wait_for
        "import time\nx = 0\ntime.sleep(x)\n",
        "import time\ntime.sleep(0)\n",
        "from time import sleep\nsleep(1)\n",
        "from asyncio import sleep as nap\n",
        "import time as t\nt.sleep(2)\n",
        "import time as t\nt.sleep(0)\n",
        "import time\nrun(sleep=time.sleep)\n",
    ]
    assert [fixed_sleeps(s) for s in refused] == [[2], [3], [3], [3], [2], [1], [1], [2], [2], [2]]
    allowed = [
        "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n",
        "from tests.support.waits import hold_silent, wait_for\nhold_silent(2)\nwait_for('x', f)\n",
        "import time\ntime.monotonic()\n",
        "def sleep(seconds):\n    pass\nsleep(3)\n",  # an injected clock's sleep
    ]
    assert [fixed_sleeps(s) for s in allowed] == [[], [], [], []]


def test_no_fixed_sleep_in_the_tests() -> None:
    """No test waits a fixed time: it polls what it waits for with a deadline
    (tests/support/waits.py ``wait_for``), uses an injected clock, or says through a named helper
    of that module why the time must pass (a silent caller, a window of the dealer's own clock,
    a paced load)."""
    found = {}
    for path in python_files():
        rel = str(path.relative_to(ROOT))
        if rel.startswith("tests/") and rel != WAITS and (lines := fixed_sleeps(path.read_text())):
            found[rel] = lines
    assert found == {}, (
        "poll with tests.support.waits.wait_for, or name the wait (hold_silent, outlast, pace)"
    )


def test_every_module_that_imports_the_codealt_code_is_left_out_without_libsodium() -> None:
    """A fresh machine without libsodium runs the suite with the co-dealt code left out (the root
    conftest's NEEDS_LIBSODIUM). The bug: five modules added later imported it at import time and
    were not in the list, so the README's test command failed to collect there."""
    from conftest import NEEDS_LIBSODIUM

    def left_out(relative: str) -> bool:
        return any(relative == p or relative.startswith(p + "/") for p in NEEDS_LIBSODIUM)

    needs = {"fairdeck.codeal"} | {
        p.removesuffix(".py").replace("/", ".").removeprefix("client.").removeprefix("server.")
        for p in NEEDS_LIBSODIUM
        if p.endswith(".py") and not p.startswith("tests/")
    }
    missed = []
    for path in sorted(
        [*ROOT.glob("client/**/*.py"), *ROOT.glob("server/**/*.py"), *ROOT.glob("tests/**/*.py")]
    ):
        relative = path.relative_to(ROOT).as_posix()
        if left_out(relative) or "/v1/" in relative:
            continue
        for node in parse(path).body:  # import-time imports only: a function may import lazily
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == m or n.startswith(m + ".") for n in names for m in needs):
                missed.append(relative)
    assert missed == [], "add them to NEEDS_LIBSODIUM in conftest.py"


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
