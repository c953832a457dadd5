"""What ``serve --codealer`` reads of the log before it makes a missing codeal.db: the first
co-dealt entry (types 3 to 7), on each engine; a log not made yet, or with ordinary entries only,
has none. Real SQLite files and a real PostgreSQL database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from fairdeck.log.audit import LogUnreadable
from fairdeck_server.storage.base import HandBatch, Storage
from fairdeck_server.storage.postgres import PostgresStorage
from fairdeck_server.storage.postgres import first_codeal_entry as first_codeal_entry_postgres
from fairdeck_server.storage.postgres import log_entry_at as log_entry_at_postgres
from fairdeck_server.storage.sqlite import SqliteStorage
from fairdeck_server.storage.sqlite import first_codeal_entry as first_codeal_entry_sqlite
from fairdeck_server.storage.sqlite import log_entry_at as log_entry_at_sqlite

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


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_the_entry_at_an_index_is_read_on_each_engine_and_an_index_past_any_log_is_refused(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``log_entry_at``, what an older codeal.db's hands are checked against: None before a log or
    past its end, the entry's bytes at its index, and an index no database can hold (a damaged
    or hostile file's) answered without an OverflowError: refused as LogUnreadable, or None."""
    if engine == "sqlite":
        db = tmp_path / "fairdeck.db"
        make: Callable[[], Storage] = lambda: SqliteStorage(db)  # noqa: E731
        at: Callable[[int], bytes | None] = lambda i: log_entry_at_sqlite(db, i)  # noqa: E731
    else:
        url: str = request.getfixturevalue("pg_url")
        make = lambda: PostgresStorage(url)  # noqa: E731
        at = lambda i: log_entry_at_postgres(url, i)  # noqa: E731

    async def run() -> tuple[bytes | None, bytes | None, bytes | None]:
        before = at(0)
        storage = make()
        await storage.start()
        try:
            await storage.create_batch(HandBatch.of_entries("t", [ORDINARY]))
        finally:
            await storage.close()
        return before, at(0), at(1)

    assert asyncio.run(run()) == (None, ORDINARY, None)
    if engine == "sqlite":  # SQLite cannot bind it: refused in words, not an OverflowError
        with pytest.raises(LogUnreadable, match="cannot read the log of database"):
            at(2**64)
    else:  # PostgreSQL compares it: no such entry
        assert at(2**64) is None
