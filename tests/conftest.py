"""Fixtures every test package can use: a throwaway PostgreSQL cluster (started
once per session, on first use), a fresh database per test, and the storage
engines behind one fixture. The cluster code lives in tests/pgcluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pgcluster import PgCluster, PgUnavailable
from tests.storage.kit import Engine


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    try:
        cluster = PgCluster()
    except PgUnavailable as e:
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
        return Engine("sqlite", lambda: SqliteStorage(path))
    from fairdeck_server.storage.postgres import PostgresStorage

    url: str = request.getfixturevalue("pg_url")
    return Engine("postgres", lambda: PostgresStorage(url))
