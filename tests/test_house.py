"""The shape of the house as tests: no import cycle in either package, at module or package
level; the server's rooms, in an order no import runs back up, with nothing set on a dealer after
it is built; gRPC only at the server's edge; no module name shared by the client and the server; no
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

from tests.support.source_tree import ROOT, parse, python_files

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


# -- the server's rooms ----------------------------------------------------------------------------

SERVER = PACKAGES["fairdeck_server"]
SHARED = ("refusals", "principal", "addresses", "fair", "log_causes")
"""The only modules at the top of fairdeck_server: small, shared by every room, storage included
(its writers take fair turns and log failures by cause), so none of them can live in a room."""
ROOMS = ("storage", "observe", "policy", "dealing", "publishing", "codealer", "edge", "run", "witness", "cli")
"""The server's rooms, bottom up: a room imports only the shared modules and the rooms before it."""


def rank(module: str) -> int:
    """0 for the package and its shared modules, else 1 + the room's place in ROOMS."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in SHARED:
        return 0
    return 1 + ROOMS.index(parts[1])


def test_no_flat_module_but_the_shared_ones() -> None:
    flat = {p.stem for p in SERVER.glob("*.py")}
    assert sorted(flat - {"__init__", *SHARED}) == [], "give it a room (see fairdeck_server/__init__.py)"


def test_every_room_is_placed_and_says_what_it_owns_and_may_import() -> None:
    rooms = {p.parent.name for p in SERVER.glob("*/__init__.py")}
    assert {p.parent.name for p in SERVER.glob("*/*.py")} <= rooms  # no folder without an __init__
    assert sorted(rooms) == sorted(ROOMS), "place a new room in ROOMS"
    for name in ROOMS:
        doc = ast.get_docstring(parse(SERVER / name / "__init__.py")) or ""
        assert doc.startswith(f"fairdeck_server.{name}") or name == "storage", name
        assert len(doc) > 40, name


def test_no_import_runs_back_up_between_rooms() -> None:
    edges = graph()
    server = {n: ts for n, ts in edges.items() if n.startswith("fairdeck_server")}
    assert "fairdeck_server.dealing.vault" in server["fairdeck_server.publishing.log_signing"]  # real edges
    up = sorted(f"{n} -> {t}" for n, ts in server.items() for t in ts if t in server and rank(t) > rank(n))
    assert up == [], "pass the collaborator in (or name what you read with a Protocol) instead"


def test_the_room_order_catches_an_import_running_up() -> None:
    assert rank("fairdeck_server.storage.base") < rank("fairdeck_server.dealing.dealer")
    assert rank("fairdeck_server.refusals") == rank("fairdeck_server") == 0
    assert rank("fairdeck_server.edge.status") < rank("fairdeck_server.run.app")


HOOKS = ("before_logging", "others_call", "watch", "reaper")
"""The collaborators once set on a dealer after it was built: the Dealer's first two, the
CodealDealer's last two (its health watch and its reaper, set by edge/codealer_link.py)."""


def hooks_set_later(source: str) -> list[int]:
    """Lines of ``source`` that set an attribute of a built dealer (``x.dealer.a = ``,
    ``dealer.a = ``), or one of HOOKS on anything but ``self``: collaborators go to the constructor."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for t in targets:
            if not isinstance(t, ast.Attribute) or not isinstance(
                node, ast.Assign | ast.AugAssign | ast.AnnAssign
            ):
                continue
            owner = t.value
            name = (
                owner.id
                if isinstance(owner, ast.Name)
                else owner.attr
                if isinstance(owner, ast.Attribute)
                else ""
            )
            if name in ("dealer", "_dealer") or (t.attr in HOOKS and name != "self"):
                lines.append(node.lineno)
    return lines


def test_hooks_set_later_are_found() -> None:
    assert hooks_set_later("self.dealer.before_logging = f\n") == [1]
    assert hooks_set_later("dealer.x = 1\nserver.dealer = Dealer()\n") == [1]
    assert hooks_set_later("d.others_call = f\n") == [1]
    assert hooks_set_later("self.before_logging = f\nself.dealer = Dealer(before_logging=f)\n") == []
    built = "codeal = CodealDealer(link)\ncodeal.watch = CodealerWatch()\ncodeal.reaper = reaper(codeal)\n"
    assert hooks_set_later(built) == [2, 3]
    assert hooks_set_later("self.watch = watch\nself.reaper = Reaper(voider)\n") == []


def test_no_collaborator_is_set_on_the_dealer_after_it_is_built() -> None:
    """The app once built the Dealer, then set its ``before_logging`` (the reaper, which called
    the dealer back) and ``others_call``; now the constructor takes them."""
    found = {
        str(path.relative_to(ROOT)): lines
        for name, path in MODULES.items()
        if name.startswith("fairdeck_server") and (lines := hooks_set_later(path.read_text()))
    }
    assert found == {}


def test_the_wiring_sets_no_collaborator_on_what_it_built() -> None:
    """The app and the co-dealer's link build the dealers; each collaborator goes to a
    constructor (the CodealDealer's health watch and reaper were set on it once it was built)."""
    for wiring in ("run/app.py", "edge/codealer_link.py"):
        source = (SERVER / wiring).read_text()
        assert "Dealer(" in source, wiring  # it does build one
        assert hooks_set_later(source) == [], wiring


# -- gRPC stays at the edge ------------------------------------------------------------------------

GRPC = ("grpc", "grpc_health", "grpc_reflection", "grpc_status")
EDGE = ("fairdeck_server.edge", "fairdeck_server.run.app")


def third_party_imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def test_only_the_edge_and_app_import_grpc() -> None:
    server = {n: p for n, p in MODULES.items() if n.startswith("fairdeck_server")}
    assert {
        "fairdeck_server.dealing.dealer",
        "fairdeck_server.policy.limits",
        "fairdeck_server.dealing.vault",
    } <= set(server)
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
        "import fairdeck_server.dealing.dealer, fairdeck_server.storage.sqlite\n"
        "import fairdeck_server.dealing.vault, fairdeck_server.policy.limits\n"
        "import fairdeck_server.policy.auth, fairdeck_server.observe.metrics\n"
        "import fairdeck_server.publishing.log_signing, fairdeck_server.publishing.cosigning\n"
        "import fairdeck_server.run.startup\n"
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
