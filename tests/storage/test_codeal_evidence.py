"""What ``serve --codealer`` reads of the log before it makes a missing codeal.db: the first
co-dealt entry (types 3 to 7), on each engine; a log not made yet, or with ordinary entries only,
has none. Real SQLite files and a real PostgreSQL database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck_server.storage.base import HandBatch, Storage
from fairdeck_server.storage.postgres import PostgresStorage
from fairdeck_server.storage.postgres import first_codeal_entry as first_codeal_entry_postgres
from fairdeck_server.storage.sqlite import SqliteStorage
from fairdeck_server.storage.sqlite import first_codeal_entry as first_codeal_entry_sqlite

ORDINARY = b"FDL1\x01" + bytes(8) + b"an ordinary entry"


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_first_codeal_entry_of_the_log_is_found_on_each_engine(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    setup = b"FDL1\x03" + bytes(8) + b"a co-dealt setup"  # type 3 (fairdeck.codeal.entries.SETUP)
    if engine == "sqlite":
        db = tmp_path / "fairdeck.db"
        make: Callable[[], Storage] = lambda: SqliteStorage(db)  # noqa: E731
        first_entry: Callable[[], int | None] = lambda: first_codeal_entry_sqlite(db)  # noqa: E731
    else:
        url: str = request.getfixturevalue("pg_url")
        make = lambda: PostgresStorage(url)  # noqa: E731
        first_entry = lambda: first_codeal_entry_postgres(url)  # noqa: E731

    async def run() -> tuple[int | None, int | None, int | None]:
        before = first_entry()  # no log yet
        storage = make()
        await storage.start()
        try:
            await storage.create_batch(HandBatch.of_entries("t", [ORDINARY]))
            ordinary = first_entry()
            await storage.create_batch(HandBatch.of_entries("t", [setup, ORDINARY]))
            found = first_entry()
        finally:
            await storage.close()
        return before, ordinary, found

    before, ordinary, found = asyncio.run(run())
    assert (before, ordinary, found) == (None, None, 1)
