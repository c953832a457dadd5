"""The storage layout as a rule: both engines are packages of the same four modules; one
``_Frontier``, in ``storage/base.py``, used by both engines (each had its own copy, which
could drift apart), checked on the source (AST) and on what the engines import; and the
frontier itself, against the Merkle module."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from fairdeck.log import merkle
from fairdeck_server.storage import base

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
    "module", ["fairdeck_server.storage.sqlite.writer", "fairdeck_server.storage.postgres.engine"]
)
def test_each_engine_uses_the_frontier_of_base(module: str) -> None:
    assert importlib.import_module(module)._Frontier is base._Frontier


def test_both_engines_have_one_shape_schema_writer_engine_reader() -> None:
    """A reader finds the same job in the same file under either engine."""
    shapes = {
        engine: sorted(p.stem for p in (STORAGE / engine).glob("*.py") if p.stem != "__init__")
        for engine in ("sqlite", "postgres")
    }
    jobs = ["diagnosis", "engine", "reader", "schema", "writer"]
    assert shapes == {"sqlite": sorted([*jobs, "batches", "handoff", "writer_lock"]), "postgres": jobs}


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


def test_postgres_is_split_by_job_and_keeps_its_imports() -> None:
    """Schema, writer, engine and the audit reader each in a module; the reader and the
    schema need none of the others; the old imports still work."""
    package = STORAGE / "postgres"
    assert sorted(p.name for p in package.glob("*.py")) == [
        "__init__.py",
        "diagnosis.py",
        "engine.py",
        "reader.py",
        "schema.py",
        "writer.py",
    ]
    assert not (STORAGE / "postgres.py").exists()
    for name in ("reader.py", "schema.py"):
        ours = {
            m for m in imported_modules(package / name) if m.startswith("fairdeck_server.storage.postgres")
        }
        assert ours == set(), name
    from fairdeck_server.storage.postgres import PostgresStorage, engine, read_log, reader

    assert PostgresStorage is engine.PostgresStorage and read_log is reader.read_log


def test_the_schema_text_did_not_change_by_a_byte() -> None:
    """SCHEMA_VERSION is a hash of the DDL: another value makes every deployed database
    run DDL (an upgrade) at the next start. Change this pin only with the schema."""
    from fairdeck_server.storage.postgres import SCHEMA_VERSION

    # Changed with log_head.last_ms and fairdeck_append's entries: entry times never go backwards.
    assert SCHEMA_VERSION == "0aeddaf29ab9c6c1"


# -- one interface, implemented whole ----------------------------------------------------------


def storage_classes() -> list[type[base.Storage]]:
    from fairdeck_server.metrics import MeteredStorage
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

    from fairdeck_server.metrics import MeteredStorage

    class Wider(base.Storage):
        @abstractmethod
        async def forget_me(self) -> None:
            """A method the wrapper does not know."""

    class Wrapper(MeteredStorage, Wider):
        pass

    with pytest.raises(TypeError, match="forget_me"):
        Wrapper(None, None)  # type: ignore[abstract, arg-type]
    assert left_out(MeteredStorage, Wider) == ["forget_me"]
