"""Fixtures every test package can use: a real dealer in this process (``running_dealer``),
a throwaway PostgreSQL cluster (started once per session, on first use), a fresh database per
test, and the storage engines behind one fixture. The helpers behind them live in tests/support/."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dealers import RunningDealer
from tests.support.engines import Engine
from tests.support.pgcluster import PgCluster, PgUnavailable

REQUIRE_POSTGRES = "CI_REQUIRE_POSTGRES"
"""Set to 1 (as .ci/run does) to fail, not skip, the PostgreSQL tests where none is installed."""


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


@pytest.fixture
def running_dealer(tmp_path: Path) -> Iterator[Callable[..., RunningDealer]]:
    """Start a real dealer in this process: ``running_dealer(data_dir=None, **ServerConfig fields)``
    (data dir default ``tmp_path/"data"``), on 127.0.0.1:0; every one made is closed at teardown."""
    made: list[RunningDealer] = []

    def start(data_dir: Path | None = None, **config: Any) -> RunningDealer:
        dealer = RunningDealer(data_dir or tmp_path / "data", **config)
        made.append(dealer)
        dealer.start()
        return dealer

    yield start
    for dealer in reversed(made):
        dealer.close()
