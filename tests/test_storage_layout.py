"""The storage layout as a rule: both engines are packages of the same job modules (SQL only in
schema, writer and reader; driver errors only in diagnosis; engine only glue), SQLite's own
modules inside sqlite/; one ``_Frontier`` (storage/base.py) and one hand row (storage/rows.py),
used by both engines; one Storage interface that each engine and the metrics wrapper implement
whole; and the frontier itself, against the Merkle module."""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import replace
from pathlib import Path

import pytest

from fairdeck.log import merkle
from fairdeck_server.storage import base, rows

STORAGE = Path(__file__).resolve().parent.parent / "server" / "fairdeck_server" / "storage"


def classes_named_frontier() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(STORAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and "frontier" in node.name.lower():
                found.setdefault(str(path.relative_to(STORAGE)), []).append(node.name)
    return found


def test_one_frontier_class_in_base_and_no_engine_defines_its_own() -> None:
    assert classes_named_frontier() == {"base.py": ["_Frontier"]}


@pytest.mark.parametrize(
    "module", ["fairdeck_server.storage.sqlite.writer", "fairdeck_server.storage.postgres.reader"]
)
def test_each_engine_uses_the_frontier_of_base(module: str) -> None:
    assert importlib.import_module(module)._Frontier is base._Frontier


JOBS = {
    "schema": "the tables, creating or upgrading them, opening the database",
    "writer": "every statement that writes",
    "reader": "every statement that reads, and the audit's read-only view of the log",
    "diagnosis": "what a driver error means, in one line that names no secret",
    "batches": "the queue of operations and the batches they run in (group commit)",
    "engine": "the Storage class gluing them, with no SQL",
}
"""The job modules every engine has, each with the same job under either engine."""
OWN = {"sqlite": {"handoff", "writer_lock", "private_db"}, "postgres": set()}
"""Modules only one engine needs (SQLite's threads take operations from loops; its writers share
a flock; the co-dealt SQLite files are made 0600 before SQLite opens them): they live in that
engine's folder, never beside base.py."""
SQL_MODULES = ("schema", "writer", "reader")


def modules(engine: str) -> set[str]:
    return {p.stem for p in (STORAGE / engine).glob("*.py") if p.stem != "__init__"}


@pytest.mark.parametrize("engine", sorted(OWN))
def test_each_engine_folder_has_the_same_job_modules(engine: str) -> None:
    """A reader finds the same job in the same file under either engine."""
    assert modules(engine) == set(JOBS) | OWN[engine]


def test_storage_itself_holds_only_what_both_engines_share() -> None:
    """handoff.py and writer_lock.py are SQLite's alone: they live in sqlite/."""
    assert sorted(p.name for p in STORAGE.glob("*.py")) == ["__init__.py", "base.py", "rows.py"]
    assert sorted(p.name for p in STORAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == [
        "postgres",
        "sqlite",
    ]
    from fairdeck_server.storage.sqlite import handoff, writer_lock

    assert handoff.give_way and writer_lock.WriterLock


SQL = re.compile(r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH)\s")
"""A string that is a statement (keywords in capitals, as every statement here is written)."""
OTHER_STORES = {
    "codeal_store": "the co-dealt hands' own file, codeal.db",
    "codeal_record": "codeal.db's identity row (its record id and its log)",
    "codeal_claim": "PostgreSQL's table of which replica holds each co-dealt record, not the log's data",
    "codealer/ledger": "the co-dealer's own database",
    "codealer/holder": "the co-dealer's own database",
    "witness/state": "the witness's own state file",
    "log_lease": "PostgreSQL's advisory lock that says who leads the log, not the log's data",
}
"""Modules outside storage/ that speak SQL, to databases (or a lock) that are not the engines'."""


def sql_literals(source: str) -> list[int]:
    """Lines of the string literals (plain, or an f-string's leading text) that are SQL statements."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if SQL.match(text):
            lines.append(node.lineno)
    return sorted(set(lines))  # an f-string's leading text is a literal of its own too


def test_the_sql_check_finds_statements_and_only_statements() -> None:
    source = """
q = "SELECT a FROM t"
w = f"INSERT INTO t ({COLUMNS}) VALUES (?)"
u = ("UPDATE t SET a = 1 "
     "WHERE b = 2")
doc = "Selecting from the table: SELECT is fine inside prose"
cte = "WITH x AS (SELECT 1) SELECT * FROM x"
"""
    assert sql_literals(source) == [2, 3, 4, 7]


def test_no_sql_outside_the_engines_schema_writer_and_reader() -> None:
    """An engine's SQL is where its job is: the engine class, the batches and the diagnosis hold
    none, and nothing else in storage/ does."""
    found = {
        str(path.relative_to(STORAGE)): lines
        for path in sorted(STORAGE.rglob("*.py"))
        if (lines := sql_literals(path.read_text()))
    }
    allowed = {f"{engine}/{name}.py" for engine in OWN for name in SQL_MODULES}
    assert {path: lines for path, lines in found.items() if path not in allowed} == {}
    assert set(found) == allowed  # each of them holds some: the check reads what it should


def test_no_sql_in_the_rest_of_the_server_but_in_stores_of_its_own() -> None:
    server = STORAGE.parent
    found = []
    for path in sorted(server.rglob("*.py")):
        rel = path.relative_to(server)
        if (
            rel.parts[0] == "storage"
            or rel.stem in OTHER_STORES
            or f"{rel.parent}/{rel.stem}" in OTHER_STORES
        ):
            continue
        found += [f"{rel}:{line}" for line in sql_literals(path.read_text())]
    assert found == []


def appended(size: int) -> tuple[dict[int, bytes], list[base._Frontier]]:
    """Stored hashes of a log of ``size`` leaves, and the frontier pushed after each append."""
    stored: dict[int, bytes] = {}
    frontier = base._Frontier([])
    after = [frontier.copy()]
    for n in range(size):
        hashes = merkle.stored_hashes_for_append(n, merkle.leaf_hash(b"entry %d" % n), frontier.read)
        start = merkle.stored_hash_index(0, n)
        stored.update((start + i, h) for i, h in enumerate(hashes))
        frontier.push(start, hashes)
        after.append(frontier.copy())
    return stored, after


def test_pushed_loaded_and_parsed_frontiers_agree_and_fold_into_the_root() -> None:
    """The three ways the engines make a frontier (SQLite pushes and loads, PostgreSQL
    parses log_head.frontier) give one stack, whose root is the tree's."""
    stored, after = appended(70)

    def read(indexes: list[int]) -> list[bytes]:
        return [stored[i] for i in indexes]

    for size, pushed in enumerate(after):
        loaded = base._Frontier.load(size, read)
        parsed = base._Frontier.parse(size, b"".join(h for _, _, h in loaded.stack))
        assert pushed.stack == loaded.stack == parsed.stack, size
        assert parsed.root() == pushed.root() == merkle.tree_hash(size, read), size
    assert base._Frontier([]).root() == merkle.EMPTY_ROOT


def test_a_frontier_that_does_not_fit_its_size_is_storage_unavailable() -> None:
    from fairdeck_server import refusals

    with pytest.raises(refusals.DealerError) as refused:
        base._Frontier.parse(3, bytes(32))  # size 3 has two complete subtrees
    assert refused.value.reason == "STORAGE_UNAVAILABLE"


def imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("engine", sorted(OWN))
def test_schema_and_reader_need_nothing_else_of_their_engine(engine: str) -> None:
    """The schema and the audit reader stand alone (``fairdeck audit`` loads no writer), and the
    old imports still work."""
    package = STORAGE / engine
    assert not (STORAGE / f"{engine}.py").exists()
    for name in ("reader.py", "schema.py"):
        ours = {
            m
            for m in imported_modules(package / name)
            if m.startswith(f"fairdeck_server.storage.{engine}") and not m.endswith(".diagnosis")
        }
        assert ours == set(), name


def test_the_engines_keep_their_imports() -> None:
    from fairdeck_server.storage.postgres import PostgresStorage, engine, read_log, reader
    from fairdeck_server.storage.sqlite import SqliteStorage, create_database
    from fairdeck_server.storage.sqlite import engine as sqlite_engine
    from fairdeck_server.storage.sqlite import read_log as sqlite_read_log
    from fairdeck_server.storage.sqlite import reader as sqlite_reader
    from fairdeck_server.storage.sqlite import schema as sqlite_schema

    assert PostgresStorage is engine.PostgresStorage and read_log is reader.read_log
    assert SqliteStorage is sqlite_engine.SqliteStorage and sqlite_read_log is sqlite_reader.read_log
    assert create_database is sqlite_schema.create_database


def test_the_schema_text_did_not_change_by_a_byte() -> None:
    """SCHEMA_VERSION is a hash of the DDL: another value makes every deployed database
    run DDL (an upgrade) at the next start. Change this pin only with the schema."""
    from fairdeck_server.storage.postgres import SCHEMA_VERSION

    # Changed with log_head.last_ms and fairdeck_append's entries: entry times never go backwards.
    assert SCHEMA_VERSION == "0aeddaf29ab9c6c1"


# -- one interface, implemented whole ----------------------------------------------------------


def storage_classes() -> list[type[base.Storage]]:
    from fairdeck_server.observe.metrics import MeteredStorage
    from fairdeck_server.storage.postgres import PostgresStorage
    from fairdeck_server.storage.sqlite import SqliteStorage

    return [SqliteStorage, PostgresStorage, MeteredStorage]


def left_out(cls: type, interface: type) -> list[str]:
    """The public members of ``interface`` that ``cls`` does not define itself (inherits, or lacks)."""
    wanted = {name for name in dir(interface) if not name.startswith("_")}
    return sorted(name for name in wanted if name not in vars(cls))


def test_storage_lists_what_the_rest_of_the_server_uses_of_an_engine() -> None:
    """Start-up's checks, the heartbeat and the metrics used to reach past the interface (a cast,
    a getattr): what they call is on it now."""
    assert {"sealed_seed_samples", "get_meta", "set_meta", "lock_held_for", "stats", "diagnose"} <= set(
        base.Storage.__abstractmethods__
    )


@pytest.mark.parametrize("cls", storage_classes(), ids=lambda c: c.__name__)
def test_each_engine_and_the_metrics_wrapper_implement_every_storage_method_themselves(cls: type) -> None:
    """Explicitly, not through ``__getattr__``: a wrapper that passes unknown names on hides a
    method it forgot to count, and its users had to ``cast`` it to Storage."""
    assert issubclass(cls, base.Storage)
    assert not getattr(cls, "__abstractmethods__", None)
    assert left_out(cls, base.Storage) == []
    assert "__getattr__" not in vars(cls)


def test_a_method_new_to_storage_and_missing_from_the_wrapper_fails() -> None:
    """What a newcomer who adds a method to Storage and forgets the wrapper meets: the wrapper
    cannot be made, and the check above names the method."""
    from abc import abstractmethod

    from fairdeck_server.observe.metrics import MeteredStorage

    class Wider(base.Storage):
        @abstractmethod
        async def forget_me(self) -> None:
            """A method the wrapper does not know."""

    class Wrapper(MeteredStorage, Wider):
        pass

    with pytest.raises(TypeError, match="forget_me"):
        Wrapper(None, None)  # type: ignore[abstract, arg-type]
    assert left_out(MeteredStorage, Wider) == ["forget_me"]


# -- one hand row ------------------------------------------------------------------------------


def test_a_hand_row_is_built_only_in_rows() -> None:
    """Both engines' rows come from ``rows.hand_row`` and ``rows.batch_hand_rows``: a tuple of
    the row's width built anywhere else in storage/ is a second spelling of the columns."""
    width = len(rows.HAND_FIELDS)
    built = [
        f"{path.relative_to(STORAGE)}:{node.lineno}"
        for path in sorted(STORAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load) and len(node.elts) == width
    ]
    assert built and all(b.startswith("rows.py:") for b in built), built
    assert ", ".join(rows.HAND_FIELDS) == rows.HAND_COLUMNS


def test_what_a_hand_row_holds_reads_back_as_the_hand() -> None:
    from fairdeck.core.versions import CURRENT_VERSION
    from fairdeck_server.storage.base import HandBatch, HandRecord, StoredHandState

    record = HandRecord(
        "t", "h1", "r1", "standard", CURRENT_VERSION, bytes(32), b"sealed", (b"a",),
        StoredHandState.CLOSED, 2, 10, 0, 11, b"seed", None, b"fp",
    )  # fmt: skip
    assert rows.hand_record(rows.hand_row(record, 7, 8)) == replace(record, commit_index=7, reveal_index=8)
    batch = HandBatch(
        "t", "standard", CURRENT_VERSION, (b"a",), True, 0, 10, ["b0", "b1"], [bytes(32)] * 2, [b""] * 2,
        [b"s0", b"s1"], [b"e"] * 4,
    )  # fmt: skip
    stored = [rows.hand_record(row) for row in rows.batch_hand_rows(batch, 5)]
    assert [(r.hand_id, r.commit_index, r.reveal_index, r.server_seed) for r in stored] == [
        ("b0", 5, 6, b"s0"),
        ("b1", 7, 8, b"s1"),
    ]
    assert all(r.state is StoredHandState.CLOSED and r.closed_ms == 10 for r in stored)
