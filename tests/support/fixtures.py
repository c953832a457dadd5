"""The fixtures every test package shares, registered once by tests/conftest.py (``pytest_plugins``).

The dealer family, the one way a test gets a dealer (a module that needs a special one calls a
factory with its options and names what it builds ``served``):
- ``dealer_factory(data_dir=None, **config)``: a real in-process dealer on 127.0.0.1:0 with any
  ServerConfig fields (data dir default ``tmp_path/"data"``), closed at teardown; per test.
- ``module_dealer_factory(name="dealer", **config)``: the same, shared by a module's tests.
- ``dealer``: the plain default, one per module; ``unlimited_dealer``: one with no rate limit.
- ``running``: a per-test default dealer; ``client`` and ``run_async``: the SDK, sync and async, on it.
- ``dealer_process_factory`` and ``module_dealer_process_factory``: ``fairdeck serve`` as a child
  process (``DealerProcess``), terminated at teardown; ``codealt_table_factory``: a co-dealer
  (``codealer_dir``) and a dealer pinned to it (``module_codealt_table``: one a module), both
  forked from ``serve_forker``: one forking process per worker (forked_serve.py).
Also: ``held_table(_factory)``, seat releases' in-process table; a throwaway PostgreSQL cluster
(one per session, on first use), a fresh database per test, and the storage engines behind one
fixture. No module-level state: each xdist worker builds its own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess, RunningDealer
from tests.support.engines import Engine
from tests.support.forked_serve import WITH_CODEALER, ServeForker
from tests.support.pgcluster import PgCluster, PgUnavailable

if TYPE_CHECKING:  # imported where used: it needs libsodium (the root conftest's NEEDS_LIBSODIUM)
    from tests.support.held_hands import HeldTable

REQUIRE_POSTGRES = "CI_REQUIRE_POSTGRES"
"""Set to 1 (as .ci/run does) to fail, not skip, the PostgreSQL tests where none is installed."""

DealerFactory = Callable[..., RunningDealer]
ProcessFactory = Callable[..., DealerProcess]
TableFactory = Callable[..., tuple[CodealerProcess, DealerProcess]]
HeldFactory = Callable[..., "HeldTable"]


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    try:
        cluster = PgCluster()
    except PgUnavailable as e:
        if os.environ.get(REQUIRE_POSTGRES) == "1":  # CI: a machine that should have it
            pytest.fail(f"{REQUIRE_POSTGRES}=1 but {e}")
        pytest.skip(str(e))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    """A postgresql:// URL of a new, empty database of the session's cluster."""
    url = pg_cluster.create_database()
    yield url
    pg_cluster.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture(params=["sqlite", "postgres"])
def storage_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """Each engine on a fresh database: SQLite on a file in tmp_path, PostgreSQL on a new database."""
    if request.param == "sqlite":
        from fairdeck_server.storage.sqlite import SqliteStorage

        path = tmp_path / "fairdeck.db"
        lock = tmp_path / "fairdeck.writer.lock"
        return Engine("sqlite", lambda: SqliteStorage(path), lambda: SqliteStorage(path, writer_lock=lock))
    from fairdeck_server.storage.postgres import PostgresStorage

    url: str = request.getfixturevalue("pg_url")
    return Engine("postgres", lambda: PostgresStorage(url), lambda: PostgresStorage(url))


def _starter(default: Callable[[], Path], made: list[RunningDealer]) -> DealerFactory:
    def start(data_dir: Path | None = None, **config: Any) -> RunningDealer:
        dealer = RunningDealer(data_dir or default(), **config)
        made.append(dealer)
        dealer.start()
        return dealer

    return start


@pytest.fixture
def dealer_factory(tmp_path: Path) -> Iterator[DealerFactory]:
    """``dealer_factory(data_dir=None, **ServerConfig fields)``: a started in-process dealer
    (data dir default ``tmp_path/"data"``); every one made is closed at teardown."""
    made: list[RunningDealer] = []
    yield _starter(lambda: tmp_path / "data", made)
    for dealer in reversed(made):
        dealer.close()


@pytest.fixture
def running_dealer(dealer_factory: DealerFactory) -> DealerFactory:
    """``dealer_factory`` under its first name, for branches written before the family."""
    return dealer_factory


@pytest.fixture
def running(dealer_factory: DealerFactory) -> RunningDealer:
    """A default dealer of this test's own (``dealer_factory()``), for tests that restart it."""
    return dealer_factory()


@pytest.fixture
def client(running: RunningDealer) -> Iterator[DealerClient]:
    """The SDK's DealerClient on ``running``."""
    with DealerClient(running.target, timeout=20) as c:
        yield c


AsyncScenario = Callable[[AsyncDealerClient], Awaitable[Any]]


@pytest.fixture
def run_async(running: RunningDealer) -> Callable[[AsyncScenario], Any]:
    """Run ``async def scenario(client)`` to completion with an AsyncDealerClient
    made inside its own event loop (pytest-asyncio is not used). Reads
    ``running.target`` at call time, so it follows a restart."""

    def run(scenario: AsyncScenario) -> Any:
        async def main() -> Any:
            async with AsyncDealerClient(running.target, timeout=20) as c:
                return await scenario(c)

        return asyncio.run(main())

    return run


@pytest.fixture(scope="module")
def module_dealer_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DealerFactory]:
    """``module_dealer_factory(name="dealer", data_dir=None, **config)``: as ``dealer_factory``,
    for a module's tests to share (data dir default ``mktemp(name)/"data"``)."""
    made: list[RunningDealer] = []

    def start(name: str = "dealer", data_dir: Path | None = None, **config: Any) -> RunningDealer:
        return _starter(lambda: tmp_path_factory.mktemp(name) / "data", made)(data_dir, **config)

    yield start
    for dealer in reversed(made):
        dealer.close()


@pytest.fixture(scope="module")
def dealer(module_dealer_factory: DealerFactory) -> RunningDealer:
    """The plain default dealer (ServerConfig's defaults), shared by a module's tests."""
    return module_dealer_factory("dealer")


@pytest.fixture(scope="module")
def unlimited_dealer(module_dealer_factory: DealerFactory) -> RunningDealer:
    """A dealer with no rate limit (``rate_limit=0``), shared by a module's tests."""
    return module_dealer_factory("unlimited", rate_limit=0)


def _process_starter(default: Callable[[], Path], made: list[DealerProcess]) -> ProcessFactory:
    def start(*args: str, data_dir: Path | None = None, **kw: Any) -> DealerProcess:
        data = data_dir or default()
        process = DealerProcess(data, data.parent / "dealer.log", *args, **kw)
        made.append(process)
        return process

    return start


@pytest.fixture
def dealer_process_factory(tmp_path: Path) -> Iterator[ProcessFactory]:
    """``dealer_process_factory(*serve flags, data_dir=None, **DealerProcess options)``: the real
    ``fairdeck serve`` started as a child process (stderr in ``dealer.log`` beside its data dir,
    default ``tmp_path/"data"``); every one made is terminated at teardown."""
    made: list[DealerProcess] = []
    yield _process_starter(lambda: tmp_path / "data", made)
    for process in reversed(made):
        process.terminate()


@pytest.fixture(scope="module")
def module_dealer_process_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessFactory]:
    """``module_dealer_process_factory(name, *serve flags, **options)``: as
    ``dealer_process_factory``, for a module's tests to share (data dir ``mktemp(name)/"data"``)."""
    made: list[DealerProcess] = []

    def start(name: str, *args: str, **kw: Any) -> DealerProcess:
        return _process_starter(lambda: tmp_path_factory.mktemp(name) / "data", made)(*args, **kw)

    yield start
    for process in reversed(made):
        process.terminate()


@pytest.fixture(scope="session")
def serve_forker() -> Iterator[ServeForker]:
    """One forking process a worker (made at first use) that starts ``fairdeck serve`` and
    ``fairdeck codealer serve`` as fresh processes without an interpreter's start each."""
    forker = ServeForker(WITH_CODEALER)
    yield forker
    forker.close()


@pytest.fixture
def codealer_dir(tmp_path: Path) -> Path:
    """A co-dealer's directory, made by `fairdeck codealer init` (``tmp_path/"cd1"``)."""
    init_codealer(tmp_path / "cd1")
    return tmp_path / "cd1"


def _table_starter(
    codealer_dir: Path,
    data_dir: Path,
    codealers: list[CodealerProcess],
    dealers: list[DealerProcess],
    forker: ServeForker,
) -> TableFactory:
    def start(*args: str) -> tuple[CodealerProcess, DealerProcess]:
        codealer = CodealerProcess(codealer_dir, forker=forker)
        codealers.append(codealer)
        log = data_dir.parent / "dealer.log"
        dealer = DealerProcess(data_dir, log, *codealer.dealer_flags(), *args, forker=forker)
        dealers.append(dealer)
        return codealer, dealer

    return start


def _stop_tables(codealers: list[CodealerProcess], dealers: list[DealerProcess]) -> None:
    for process in reversed(dealers):
        process.terminate()
    for codealer in reversed(codealers):
        codealer.stop()


@pytest.fixture
def codealt_table_factory(
    tmp_path: Path, codealer_dir: Path, serve_forker: ServeForker
) -> Iterator[TableFactory]:
    """``codealt_table_factory(*serve flags)``: a real co-dealer on ``codealer_dir`` and the real
    ``fairdeck serve`` pinned to it (its flags, then these; data dir ``tmp_path/"data"``), as
    (co-dealer, dealer); at teardown the dealer stops first, then the co-dealer."""
    codealers: list[CodealerProcess] = []
    dealers: list[DealerProcess] = []
    yield _table_starter(codealer_dir, tmp_path / "data", codealers, dealers, serve_forker)
    _stop_tables(codealers, dealers)


@pytest.fixture(scope="module")
def module_codealt_table(
    tmp_path_factory: pytest.TempPathFactory, serve_forker: ServeForker
) -> Iterator[tuple[CodealerProcess, DealerProcess]]:
    """One co-dealer and dealer pinned to it (``codealt_table_factory()``'s), shared by a module's
    tests that each deal hands of their own and stop neither process: two interpreters' start-up
    and the pool's decks shuffled ahead once a module, not once a test."""
    base = tmp_path_factory.mktemp("codealt")
    init_codealer(base / "cd1")
    codealers: list[CodealerProcess] = []
    dealers: list[DealerProcess] = []
    try:
        yield _table_starter(base / "cd1", base / "data", codealers, dealers, serve_forker)()
    finally:
        _stop_tables(codealers, dealers)


@pytest.fixture
def held_table_factory(tmp_path: Path) -> HeldFactory:
    """``held_table_factory(lifetime_ms=0, reveal_hold_ms=HOLD_MS)``: the seat-release tests' table
    (tests/support/held_hands.py) on real SQLite files under ``tmp_path``, its clock at T0."""

    from tests.support.held_hands import held_table as make_held_table

    def make(**kw: int) -> HeldTable:
        return make_held_table(tmp_path, **kw)

    return make


@pytest.fixture
def held_table(held_table_factory: HeldFactory) -> HeldTable:
    """The seat-release tests' table with its default hold (HOLD_MS) and no co-dealer lifetime."""
    return held_table_factory()
