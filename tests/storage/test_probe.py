"""Storage.probe(): the write health makes while storage is failing (storage_health.py).

It must be a real durable write, so that it fails whenever the dealer's own
writes would: real SQLite files and a real PostgreSQL cluster.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import psycopg
import pytest

from fairdeck_server import refusals
from fairdeck_server.storage.postgres import PostgresStorage
from fairdeck_server.storage.sqlite import SqliteStorage


def test_sqlite_probe_commits_a_row(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        await storage.probe()
        await storage.probe()  # rewrites the same row: the table never grows
        await storage.close()

    asyncio.run(scenario())
    with sqlite3.connect(tmp_path / "fairdeck.db") as db:  # committed: another connection sees it
        assert db.execute("SELECT id FROM health_probe").fetchall() == [(1,)]


def _sql(url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")  # this session may always write
        cur = conn.execute(query)
        return cur.fetchall() if cur.description else []


def test_postgres_probe_takes_a_transaction_id_and_fails_on_a_read_only_database(pg_url: str) -> None:
    async def scenario() -> None:
        storage = PostgresStorage(pg_url)
        await storage.start()
        try:
            (before,) = _sql(pg_url, "SELECT txid_snapshot_xmax(txid_current_snapshot())")[0]
            await storage.probe()
            (after,) = _sql(pg_url, "SELECT txid_snapshot_xmax(txid_current_snapshot())")[0]
            assert int(after) > int(before)  # type: ignore[call-overload]  # a transaction id was used

            # The database turns read-only (as after a failover to a standby), for new sessions;
            # the dealer's sessions end, and the pool opens read-only ones.
            _sql(
                pg_url,
                "DO $$ BEGIN EXECUTE format("
                "'ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$",
            )
            kill = (
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            _sql(pg_url, kill)
            failures = []
            for _ in range(3):  # the first attempts may meet a session that was ended
                with pytest.raises(refusals.DealerError) as failed:
                    await storage.probe()
                failures.append(failed.value.reason)
            assert set(failures) == {"STORAGE_UNAVAILABLE"}

            _sql(
                pg_url,
                "DO $$ BEGIN EXECUTE format("
                "'ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$",
            )
            _sql(pg_url, kill)
            for _ in range(3):
                try:
                    await storage.probe()
                    break
                except refusals.DealerError:
                    continue
            await storage.probe()
        finally:
            await storage.close()

    asyncio.run(scenario())
