"""Which replica holds each co-dealt record, on PostgreSQL: a claim row per record id in the shared database.

Replicas share the log but each has its own codeal.db (codeal_record.py gives it a random record
id, kept by any copy). ``claim`` runs at start: a record claimed by another holder (another replica
name, --replica-name or else the host name, or another data dir's real path) is refused in one line
naming the file and the fixes; the same holder (a restart: its data dir's lock makes it the only
process there) takes its claim again, at once if ``let_go`` released it at a clean stop. A knowing
move (``init --codeal-record --take-over``) takes it once the old holder let it go or was silent for
``STALE_S``. ``renew``, every ``RENEW_EVERY`` on its own thread (never behind the health round),
keeps the claim alive under this process's random instance id, takes back a row gone or released at
this place (a restore, a failover), and says why to stop once another holds it; ``unconfirmed``
says so while none was confirmed for ``VOUCH_S``. None connects or vouches once ``let_go`` began.
An upgraded record (older file) claims each of its hands whenever its claim is made, so two copies
of one older file are refused too. Times: the database's clock, never ours.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairdeck_server.dealing.codeal_record import Record
from fairdeck_server.log_causes import Repeats, cause

log = logging.getLogger(__name__)

CLAIM_LOCK = 0x6664_6B04
"""pg_advisory_xact_lock key of claims (beside the schema, checkpoint and lead locks)."""
STALE_S = 6.0
"""Seconds without a renewal after which a claim may be taken over knowingly (3 health rounds)."""
RENEW_EVERY = 1.0
"""Seconds between renewals, on their own thread: a slow co-dealer or probe never delays them."""
VOUCH_S = 4.0
"""Seconds a confirmed renewal vouches for the claim: 4 renewal periods, 2 s short of ``STALE_S``.
An open checks it again after the co-dealer's answer, just before its first write; a draw or a close
checks it as it begins only, and may finish after it lapsed (its co-dealer calls wait up to 10 s)."""
RELEASED = ""
"""The instance of a claim its holder let go at a clean stop."""
CONNECT_TIMEOUT_S = 10
LINK: dict[str, Any] = {  # a dead or blackholed link ends a renewal in seconds, never hangs it
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 10_000,
    "options": "-c statement_timeout=5000",
}
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
INSERT = (  # the times: NOW's, the database's clock
    "INSERT INTO codeal_claims (record_id, host, data_dir, instance, claimed_ms, seen_ms) "
    "VALUES (%s, %s, %s, %s, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, "
    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint)"
)
UPSERT = (
    INSERT + " ON CONFLICT (record_id) DO UPDATE SET "
    "host = excluded.host, data_dir = excluded.data_dir, instance = excluded.instance, "
    "claimed_ms = excluded.claimed_ms, seen_ms = excluded.seen_ms"
)


NAME_MAX = 64


def check_replica_name(name: str) -> None:
    """--replica-name: printable, at most NAME_MAX characters, else ValueError saying so."""
    if not name or len(name) > NAME_MAX or not name.isprintable() or name != name.strip():
        raise ValueError(
            f"want a stable name of this replica (1 to {NAME_MAX} printable characters, no spaces at "
            f"either end), not {name[: NAME_MAX + 1]!r}"
        )


def _left(confirmed: float | None, now: float) -> float | None:
    """Seconds from ``now`` until a claim last confirmed at ``confirmed`` lapses (None: never was)."""
    return None if confirmed is None else confirmed + VOUCH_S - now


class ClaimRefused(Exception):
    """The record is another holder's; the message names the file, the holder and the fixes."""


@dataclass(frozen=True)
class Holder:
    """Who holds a record: the replica's name (--replica-name, else the host name), the data dir's
    real path, and a random id per process."""

    host: str
    data_dir: str
    instance: str

    @classmethod
    def here(cls, data_dir: Path, name: str | None = None) -> Holder:
        return cls(name or socket.gethostname(), str(data_dir.resolve()), secrets.token_hex(8))

    def place(self) -> str:
        return f"{self.host}:{self.data_dir}"


class CodealClaim:
    def __init__(self, url: str, path: Path, record: Record, holder: Holder) -> None:
        self.url = url
        self.path = path
        self.record = record
        self.holder = holder
        self._conn: Any = None
        self._hands: Callable[[], list[str]] = list
        self.clock: Callable[[], float] = time.monotonic
        self.confirmed: float | None = None
        """When (``clock``) the last confirmed claim or renewal was sent: the database's ``seen_ms``
        is no older."""
        self.sending: float | None = None
        """When (``clock``) the renewal now in flight was sent, or None."""
        self.failed: str | None = None
        """Why the last renewal failed, or None."""
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # around ``_conn``: the renewals' thread and ``let_go``
        self._thread: threading.Thread | None = None

    def _fixes(self, take_over: bool) -> str:
        data = self.path.parent
        fixes = (
            "put back this replica's own codeal.db from its backup (or, if it never had one, move this "
            f"one away with its -wal and -shm and run `fairdeck init --codeal-record --data {data}`)"
        )
        if take_over:
            fixes += (
                "; if that replica was moved here knowingly and is stopped for good, run "
                f"`fairdeck init --codeal-record --take-over --db URL --data {data}`"
            )
        return fixes

    def claim(self, hands: Callable[[], list[str]], *, take_over: bool = False) -> None:
        """Hold the record for this process, or ``ClaimRefused``. ``hands``: the file's hand ids,
        read only for an upgraded record (here, and by a renewal that makes its row again).
        ``take_over``: a knowing move, from a holder silent for ``STALE_S`` at least (or released)."""
        import psycopg

        record_id, me = self.record.record_id, self.holder
        self._hands = hands
        with psycopg.connect(
            self.url, connect_timeout=CONNECT_TIMEOUT_S, application_name="fairdeck-codeal", **LINK
        ) as conn:
            seen = None if take_over else self._wait_out_twin(conn)
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            conn.execute(CLAIMS)
            conn.execute(HANDS)
            row = conn.execute(
                f"SELECT host, data_dir, ({NOW} - seen_ms) / 1000.0, instance, seen_ms "  # noqa: S608
                "FROM codeal_claims WHERE record_id = %s FOR UPDATE",
                (record_id,),
            ).fetchone()
            if (  # compare-and-set: this place's row changed since looked at, by a twin's start
                not take_over
                and row is not None
                and (row[0], row[1]) == (me.host, me.data_dir)
                and row[3] != RELEASED
                and (row[3], row[4]) != seen
            ):
                raise self._twin("claimed while this one started")
            if row is not None and (row[0], row[1]) != (me.host, me.data_dir):
                where, ago = f"{row[0]}:{row[1]}", float(row[2])
                if not take_over and row[1] == me.data_dir:
                    raise ClaimRefused(
                        f"co-dealt hands {self.path}: record {record_id} is held on this database by this "
                        f"data dir under another replica name (seen {ago:.0f} s ago): the host name changed "
                        f"({row[0]} -> {me.host}), as in a re-created container; if the old one is stopped, "
                        f"run `fairdeck init --codeal-record --take-over --db URL --data {self.path.parent}` "
                        "once, and give this replica a stable --replica-name (FAIRDECK_REPLICA_NAME)"
                    )
                if not take_over:
                    raise ClaimRefused(
                        f"co-dealt hands {self.path} is record {record_id}, which the replica at {where} "
                        f"holds on this database (seen {ago:.0f} s ago): a copy of another replica's "
                        "codeal.db (two dealers would hold, and close, the same hands); " + self._fixes(True)
                    )
                if ago < STALE_S and row[3] != RELEASED:
                    raise ClaimRefused(
                        f"co-dealt hands {self.path}: record {record_id} is held by the replica at {where}, "
                        f"alive {ago:.1f} s ago: stop it first (a take-over waits {STALE_S:g} s of silence)"
                    )
            if self.record.upgraded:  # each time: a restored database may have lost them
                self._claim_hands(conn, hands(), take_over)
            sent = self.clock()
            conn.execute(UPSERT, (record_id, me.host, me.data_dir, me.instance))
        self.confirmed = sent

    def _twin(self, meanwhile: str) -> ClaimRefused:
        me, record_id = self.holder, self.record.record_id
        return ClaimRefused(
            f"co-dealt hands {self.path}: record {record_id} is held by another live process under "
            f"this same replica name and data dir ({me.place()}), {meanwhile}: two replicas share "
            "one name and data dir path; give each its own "
            "--replica-name (FAIRDECK_REPLICA_NAME) and its own codeal.db"
        )

    def _wait_out_twin(self, conn: Any) -> tuple[str, int] | None:
        """This holder's claim renewed under another instance less than ``STALE_S`` ago: a restart
        just after a crash, or a twin (two containers under one name and data dir path, each with
        its own copy). Wait until it is ``STALE_S`` old, then refuse if it was renewed meanwhile.
        The row's instance and ``seen_ms`` as last read, which ``claim`` compares under its lock."""
        me, record_id = self.holder, self.record.record_id
        if conn.execute("SELECT to_regclass('codeal_claims') IS NULL").fetchone()[0]:
            return None
        query = (
            f"SELECT host, data_dir, instance, seen_ms, ({NOW} - seen_ms) / 1000.0 "  # noqa: S608
            "FROM codeal_claims WHERE record_id = %s"
        )
        row = conn.execute(query, (record_id,)).fetchone()
        conn.commit()
        if row is None:
            return None
        if (row[0], row[1]) != (me.host, me.data_dir) or row[2] in (me.instance, RELEASED):
            return (str(row[2]), int(row[3]))
        if (ago := float(row[4])) >= STALE_S:
            return (str(row[2]), int(row[3]))
        log.info(
            "co-dealt hands %s: record %s was renewed %.1f s ago by another process of this replica and "
            "not released (a crash, or a twin): waiting %.1f s to tell them apart",
            self.path,
            record_id,
            ago,
            STALE_S - ago,
        )
        time.sleep(STALE_S - ago)
        again = conn.execute(query, (record_id,)).fetchone()
        conn.commit()
        if again is not None and again[2] != RELEASED and (again[2], again[3]) != (row[2], row[3]):
            raise self._twin(f"renewed while this one waited {STALE_S:g} s")
        return None if again is None else (str(again[2]), int(again[3]))

    def _claim_hands(self, conn: Any, hand_ids: list[str], take_over: bool) -> None:
        """Each hand of an upgraded record, claimed for it: a hand another record claimed is the
        trace of two copies of one older file, or, that record held by this same place, of this
        replica's own backup from before its upgrade restored (taken over knowingly: its hands and
        claim move to this record, so the file it replaced is refused if it comes back)."""
        record_id, me = self.record.record_id, self.holder
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO codeal_claimed_hands (hand_id, record_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                [(h, record_id) for h in hand_ids],
            )
        other = conn.execute(
            f"SELECT h.hand_id, h.record_id, c.host, c.data_dir, ({NOW} - c.seen_ms) / 1000.0, "  # noqa: S608
            "c.instance FROM codeal_claimed_hands h LEFT JOIN codeal_claims c ON c.record_id = h.record_id "
            "WHERE h.hand_id = ANY(%s) AND h.record_id != %s LIMIT 1",
            (hand_ids, record_id),
        ).fetchone()
        if other is None:
            return
        if (other[2], other[3]) != (me.host, me.data_dir):
            raise ClaimRefused(
                f"co-dealt hands {self.path} (record {record_id}, given at its upgrade) holds hand "
                f"{other[0]}, which record {other[1]} of the replica at {other[2]}:{other[3]} holds too: "
                "two copies of one older codeal.db; " + self._fixes(False)
            )
        if not take_over:
            raise ClaimRefused(
                f"co-dealt hands {self.path} (record {record_id}, given at its upgrade) holds hand "
                f"{other[0]}, which record {other[1]} of this same replica holds: a restore of this "
                "replica's own codeal.db from before its upgrade, over the file it had since; put back "
                f"its latest codeal.db (record {other[1]}), or, to serve this older one knowingly (with "
                f"the replica stopped), run `fairdeck init --codeal-record --take-over --db URL --data "
                f"{self.path.parent}`"
            )
        if other[4] is not None and float(other[4]) < STALE_S and other[5] != RELEASED:
            raise ClaimRefused(
                f"co-dealt hands {self.path}: record {other[1]} is renewed by a live process of this "
                f"replica ({me.place()}): stop it first (a take-over waits {STALE_S:g} s of silence)"
            )
        conn.execute(
            "UPDATE codeal_claimed_hands SET record_id = %s WHERE record_id = %s", (record_id, other[1])
        )
        conn.execute("DELETE FROM codeal_claims WHERE record_id = %s", (other[1],))

    def start_renewals(self, lost: Callable[[str | None], None], every: float = RENEW_EVERY) -> None:
        """Renew every ``every`` seconds on a thread of its own until ``let_go``; ``lost`` gets each
        renewal's answer (None: held)."""

        repeats = Repeats(log)  # one line, then once per 10 s while it recurs

        def run() -> None:
            while not self._stopping.is_set():
                began = time.monotonic()
                try:  # nothing ends the renewals but let_go: an unforeseen error is said, refused
                    why = self.renew()
                    if not self._stopping.is_set():
                        lost(why)
                    repeats.clear()
                except Exception as e:  # the claim counts as unconfirmed meanwhile
                    self.failed = cause(e)
                    if not self._stopping.is_set():
                        repeats.log(
                            logging.ERROR, f"co-dealt hands {self.path}: a claim renewal failed: {cause(e)}"
                        )
                # from send to send: one answered late (it vouches from its send) is followed at once
                self._stopping.wait(max(0.0, every - (time.monotonic() - began)))

        self._thread = threading.Thread(target=run, name="fairdeck-codeal-claim", daemon=True)
        self._thread.start()

    def renew(self) -> str | None:
        """Keep the claim alive; None while this process holds it, else why it must stop co-dealing
        (another process took it, or the database cannot say). A failed renewal is tried once more
        on a fresh connection (the kept one dies with a database restart)."""
        import psycopg

        if self._stopping.is_set():
            record_id = self.record.record_id
            return f"co-dealt hands {self.path}: this process let go its claim of record {record_id}"
        for attempt in (1, 2):
            sent = self.sending = self.clock()
            try:
                row = self._renew_once()
                break
            except ClaimRefused as e:  # its row made again, but a hand of it is another record's
                self.failed = str(e)
                return str(e)
            except psycopg.Error as e:
                self.release()
                if attempt == 2:
                    self.failed = cause(e)
                    return (
                        f"cannot confirm that this replica holds co-dealt record {self.record.record_id}: "
                        f"{cause(e)}"
                    )
            finally:
                self.sending = None
        if row is None:
            self.failed = None
            if not self._stopping.is_set():  # a renewal ending after let_go vouches for nothing
                self.confirmed = sent
            return None
        self.failed = f"held by the replica at {row[0]}:{row[1]}"
        return (
            f"co-dealt hands {self.path}: record {self.record.record_id} is now held by the replica at "
            f"{row[0]}:{row[1]}, not this process: two dealers would hold the same hands; stop this one "
            "(it opens, deals and closes no co-dealt hand)"
        )

    def _renew_once(self) -> tuple[str, str] | None:
        """None while this process holds the claim (made again if its row is gone), else its holder."""
        import psycopg

        with self._lock:
            conn = self._conn
        if conn is None or conn.closed:
            if self._stopping.is_set():
                raise psycopg.OperationalError("the claim is being let go")
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="fairdeck-codeal",
                **LINK,
            )
            with self._lock:
                stopping, self._conn = self._stopping.is_set(), conn
            if stopping:  # let_go began while it connected: never renew after it
                self.release()
                raise psycopg.OperationalError("the claim is being let go")
        me, record_id = self.holder, self.record.record_id
        mine = conn.execute(
            f"UPDATE codeal_claims SET seen_ms = {NOW} WHERE record_id = %s AND instance = %s "  # noqa: S608
            "RETURNING 1",
            (record_id, me.instance),
        ).fetchone()
        if mine is not None:
            return None
        with conn.transaction():  # the row gone (a restore, a failover, a delete): this holder's again
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            made = conn.execute(
                INSERT + " ON CONFLICT (record_id) DO NOTHING RETURNING 1",
                (record_id, me.host, me.data_dir, me.instance),
            ).fetchone()
            if made is None and not self._stopping.is_set():  # released at this place (a restore): ours
                made = conn.execute(
                    f"UPDATE codeal_claims SET instance = %s, seen_ms = {NOW} "  # noqa: S608
                    "WHERE record_id = %s AND instance = %s AND host = %s AND data_dir = %s RETURNING 1",
                    (me.instance, record_id, RELEASED, me.host, me.data_dir),
                ).fetchone()
            if made is not None and self.record.upgraded:  # and its hands, lost with it
                conn.execute(HANDS)
                self._claim_hands(conn, self._hands(), False)
            row = conn.execute(
                "SELECT host, data_dir FROM codeal_claims WHERE record_id = %s", (record_id,)
            ).fetchone()
        if made is not None:
            log.warning(
                "co-dealt hands %s: the claim of record %s was gone from the database or marked released "
                "(a restore or a failover): this replica holds it again",
                self.path,
                record_id,
            )
            return None
        return (str(row[0]), str(row[1])) if row is not None else ("?", "?")

    def vouched_for(self) -> float | None:
        """Seconds (``clock``) until the claim lapses, ``VOUCH_S`` after the last confirmed renewal
        was sent (0 or less: lapsed); None while none was confirmed. The one deadline of
        ``unconfirmed``: co-dealt health wakes at it (codeal_health.py)."""
        return _left(self.confirmed, self.clock())

    def unconfirmed(self) -> str | None:
        """Why this process cannot count on its claim now (no renewal confirmed for ``VOUCH_S``:
        one hangs, or fails), or None. Co-dealt calls and co-dealt health both ask this."""
        confirmed, sending, failed, now = self.confirmed, self.sending, self.failed, self.clock()
        left = _left(confirmed, now)
        if left is not None and left > 0:
            return None
        ago = None if confirmed is None else now - confirmed
        since = "" if ago is None else f" for {ago:.1f} s"
        if sending is not None:
            why = f"the database has not answered the renewal sent {now - sending:.1f} s ago"
        elif failed is not None:
            why = f"the last renewal failed: {failed}"
        else:
            why = "no renewal was attempted since the last one confirmed (answered late, or renewals late)"
        return (
            f"cannot confirm that this replica holds co-dealt record {self.record.record_id}: no renewal "
            f"of its claim confirmed{since} (renewed every {RENEW_EVERY:g} s; {why}): co-dealt calls are "
            "refused until one is"
        )

    def release(self) -> None:
        """Close the renewals' connection (the claim row stays: a restart takes it again)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def let_go(self) -> None:
        """A clean stop: the renewals' connection closed and the claim, if still this process's,
        marked released, so this replica's next start takes it at once (a crash leaves it unmarked:
        that start waits out ``STALE_S``). A database that does not answer is said, never raised."""
        import psycopg

        self._stopping.set()
        self.release()
        self.confirmed = None
        try:
            with psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=2,
                application_name="fairdeck-codeal",
                **{**LINK, "options": "-c statement_timeout=2000"},
            ) as conn:
                done = conn.execute(
                    f"UPDATE codeal_claims SET instance = %s, seen_ms = {NOW} "  # noqa: S608
                    "WHERE record_id = %s AND instance = %s RETURNING 1",
                    (RELEASED, self.record.record_id, self.holder.instance),
                ).fetchone()
        except psycopg.Error as e:
            log.warning(
                "co-dealt hands %s: cannot mark the claim of record %s released (%s): this replica's "
                "next start waits up to %g s",
                self.path,
                self.record.record_id,
                cause(e),
                STALE_S,
            )
            return
        if done is not None:
            log.info("co-dealt hands %s: its claim of record %s released", self.path, self.record.record_id)
