"""Which replica holds each co-dealt record, on PostgreSQL: a claim row per record id in the shared database.

Replicas share the log but each has its own codeal.db (codeal_record.py gives it a random record
id, kept by any copy). ``claim`` runs at start: a record claimed by another holder (another host,
or another data dir's real path) is refused in one line naming the file and the fixes, so a
replica started with a copy of another's codeal.db never serves it; the same holder (a restart of
the same replica: its data dir's lock makes it the only process there) takes its claim again. A
knowing move (``fairdeck init --codeal-record --take-over``) takes the claim for a new holder,
only once the old one has not renewed it for ``STALE_S``. ``renew``, every co-dealt health round,
keeps the claim alive under this process's random instance id and says, once another process took
it, why this one must stop co-dealing. An upgraded record (older file: its hands predate its id)
also claims each of its hands at its first claim, so two copies of one older file are refused too.
Times are the database's clock, never a replica's.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairdeck_server.dealing.codeal_record import Record
from fairdeck_server.log_causes import cause

CLAIM_LOCK = 0x6664_6B04
"""pg_advisory_xact_lock key of claims (beside the schema, checkpoint and lead locks)."""
STALE_S = 6.0
"""Seconds without a renewal after which a claim may be taken over knowingly (3 health rounds)."""
CONNECT_TIMEOUT_S = 10
CLAIMS = """CREATE TABLE IF NOT EXISTS codeal_claims (
    record_id  text PRIMARY KEY,
    host       text NOT NULL,
    data_dir   text NOT NULL,
    instance   text NOT NULL,
    claimed_ms bigint NOT NULL,
    seen_ms    bigint NOT NULL
)"""
HANDS = "CREATE TABLE IF NOT EXISTS codeal_claimed_hands (hand_id text PRIMARY KEY, record_id text NOT NULL)"
NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
UPSERT = (  # the times: NOW's, the database's clock
    "INSERT INTO codeal_claims (record_id, host, data_dir, instance, claimed_ms, seen_ms) "
    "VALUES (%s, %s, %s, %s, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, "
    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint) ON CONFLICT (record_id) DO UPDATE SET "
    "host = excluded.host, data_dir = excluded.data_dir, instance = excluded.instance, "
    "claimed_ms = excluded.claimed_ms, seen_ms = excluded.seen_ms"
)


class ClaimRefused(Exception):
    """The record is another holder's; the message names the file, the holder and the fixes."""


@dataclass(frozen=True)
class Holder:
    """Who holds a record: the host, the data dir's real path, and a random id per process."""

    host: str
    data_dir: str
    instance: str

    @classmethod
    def here(cls, data_dir: Path) -> Holder:
        return cls(socket.gethostname(), str(data_dir.resolve()), secrets.token_hex(8))

    def place(self) -> str:
        return f"{self.host}:{self.data_dir}"


class CodealClaim:
    def __init__(self, url: str, path: Path, record: Record, holder: Holder) -> None:
        self.url = url
        self.path = path
        self.record = record
        self.holder = holder
        self._conn: Any = None

    def _fixes(self, take_over: bool) -> str:
        data = self.path.parent
        fixes = (
            "put back this replica's own codeal.db from its backup (or, if it never had one, move this "
            f"one away and run `fairdeck init --codeal-record --data {data}`)"
        )
        if take_over:
            fixes += (
                "; if that replica was moved here knowingly and is stopped for good, run "
                f"`fairdeck init --codeal-record --take-over --db URL --data {data}`"
            )
        return fixes

    def claim(self, hands: Callable[[], list[str]], *, take_over: bool = False) -> None:
        """Hold the record for this process, or ``ClaimRefused``. ``hands``: the file's hand ids,
        read only for an upgraded record's first claim. ``take_over``: a knowing move, from a
        holder silent for ``STALE_S`` at least."""
        import psycopg

        record_id, me = self.record.record_id, self.holder
        with psycopg.connect(
            self.url, connect_timeout=CONNECT_TIMEOUT_S, application_name="fairdeck-codeal"
        ) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            conn.execute(CLAIMS)
            conn.execute(HANDS)
            row = conn.execute(
                f"SELECT host, data_dir, ({NOW} - seen_ms) / 1000.0 FROM codeal_claims "  # noqa: S608
                "WHERE record_id = %s FOR UPDATE",
                (record_id,),
            ).fetchone()
            if row is not None and (row[0], row[1]) != (me.host, me.data_dir):
                where, ago = f"{row[0]}:{row[1]}", float(row[2])
                if not take_over:
                    raise ClaimRefused(
                        f"co-dealt hands {self.path} is record {record_id}, which the replica at {where} "
                        f"holds on this database (seen {ago:.0f} s ago): a copy of another replica's "
                        "codeal.db (two dealers would hold, and close, the same hands); " + self._fixes(True)
                    )
                if ago < STALE_S:
                    raise ClaimRefused(
                        f"co-dealt hands {self.path}: record {record_id} is held by the replica at {where}, "
                        f"alive {ago:.1f} s ago: stop it first (a take-over waits {STALE_S:g} s of silence)"
                    )
            if row is None and self.record.upgraded:
                self._claim_hands(conn, hands())
            conn.execute(UPSERT, (record_id, me.host, me.data_dir, me.instance))

    def _claim_hands(self, conn: Any, hand_ids: list[str]) -> None:
        """Each hand of an upgraded record, claimed for it: a hand another record claimed is the
        trace of two copies of one older file."""
        record_id = self.record.record_id
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO codeal_claimed_hands (hand_id, record_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                [(h, record_id) for h in hand_ids],
            )
        other = conn.execute(
            "SELECT h.hand_id, h.record_id, c.host, c.data_dir FROM codeal_claimed_hands h "
            "LEFT JOIN codeal_claims c ON c.record_id = h.record_id "
            "WHERE h.hand_id = ANY(%s) AND h.record_id != %s LIMIT 1",
            (hand_ids, record_id),
        ).fetchone()
        if other is not None:
            raise ClaimRefused(
                f"co-dealt hands {self.path} (record {record_id}, given at its upgrade) holds hand "
                f"{other[0]}, which record {other[1]} of the replica at {other[2]}:{other[3]} holds too: "
                "two copies of one older codeal.db; " + self._fixes(False)
            )

    def renew(self) -> str | None:
        """Keep the claim alive; None while this process holds it, else why it must stop co-dealing
        (another process took it, or the database cannot say)."""
        import psycopg

        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    application_name="fairdeck-codeal",
                )
            mine = self._conn.execute(
                f"UPDATE codeal_claims SET seen_ms = {NOW} WHERE record_id = %s AND instance = %s "  # noqa: S608
                "RETURNING 1",
                (self.record.record_id, self.holder.instance),
            ).fetchone()
            if mine is not None:
                return None
            row = self._conn.execute(
                "SELECT host, data_dir FROM codeal_claims WHERE record_id = %s", (self.record.record_id,)
            ).fetchone()
        except psycopg.Error as e:
            self.release()
            return (
                f"cannot confirm that this replica holds co-dealt record {self.record.record_id}: {cause(e)}"
            )
        where = "no replica" if row is None else f"the replica at {row[0]}:{row[1]}"
        return (
            f"co-dealt hands {self.path}: record {self.record.record_id} is now held by {where}, not this "
            "process: two dealers would hold the same hands; stop this one (it opens, deals and closes no "
            "co-dealt hand)"
        )

    def release(self) -> None:
        """Close the renewals' connection (the claim row stays: a restart takes it again)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
