"""The log's identity in the database (fairdeck_meta): a database made before it existed is
upgraded in place and keeps serving; PostgreSQL's schema version moves once, not per start."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck_server.refusals import StartupRefused
from fairdeck_server.run import startup
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.dealers import RunningDealer


def _deal(dealer: RunningDealer) -> None:
    with DealerClient(dealer.target, timeout=20) as client:
        opened = client.open_hand("standard")
        client.close_hand(opened.hand_id)


def _meta(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT name, value FROM fairdeck_meta").fetchall())


def test_a_sqlite_data_dir_from_before_the_record_starts_and_records_its_key(tmp_path: Path) -> None:
    data = tmp_path / "data"
    dealer = RunningDealer(data, checkpoint_interval=0.02)
    try:
        dealer.start()
        _deal(dealer)
        verifier = dealer.server.identity.log_keys.signer.verifier.to_string()  # type: ignore[union-attr]
        dealer.stop()
        assert _meta(data / "fairdeck.db") == {"log_key": verifier}
        with sqlite3.connect(data / "fairdeck.db") as conn:  # as a database of the previous version
            conn.execute("DROP TABLE fairdeck_meta")
        dealer.start()
        _deal(dealer)
        dealer.stop()
        assert _meta(data / "fairdeck.db") == {"log_key": verifier}
    finally:
        dealer.close()


def test_without_the_record_another_key_is_still_caught_by_the_signed_checkpoint(tmp_path: Path) -> None:
    data, other = tmp_path / "data", tmp_path / "other"
    dealer = RunningDealer(data, checkpoint_interval=0.02)
    try:
        dealer.start()
        _deal(dealer)
        dealer.stop()
        startup.init(other, environ={})
        (data / "log.key").write_bytes((other / "log.key").read_bytes())
        with sqlite3.connect(data / "fairdeck.db") as conn:
            conn.execute("DROP TABLE fairdeck_meta")
        with pytest.raises(StartupRefused, match="does not verify the latest checkpoint"):
            dealer.start()
        dealer.server = None
    finally:
        dealer.close()


def test_sqlite_without_create_refuses_a_missing_file_and_makes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "fairdeck.db"
    with pytest.raises(StartupRefused, match="no database at"):
        asyncio.run(SqliteStorage(path, create=False).start())
    assert not path.parent.exists()


def test_postgres_schema_gains_the_record_once(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    from fairdeck_server.storage import postgres

    keys = tmp_path / "keys"
    startup.init(keys, keys_only=True, environ={})
    config = {"db": pg_url, "seed_key_file": keys / "seed.key", "log_key_file": keys / "log.key"}
    dealer = RunningDealer(tmp_path / "data", **config)
    try:
        dealer.start()
        _deal(dealer)
        dealer.stop()
        with psycopg.connect(pg_url, autocommit=True) as conn:  # back to a version without the record
            conn.execute("DROP TABLE fairdeck_meta")
            conn.execute("UPDATE fairdeck_schema SET version = 'before-fairdeck_meta'")
        dealer.start()
        _deal(dealer)
        dealer.stop()
        with psycopg.connect(pg_url) as conn:
            version = conn.execute("SELECT version FROM fairdeck_schema").fetchone()
            recorded = conn.execute("SELECT name FROM fairdeck_meta").fetchall()
        assert version == (postgres.SCHEMA_VERSION,) and recorded == [("log_key",)]
    finally:
        dealer.close()
