"""A co-dealt record's claim on PostgreSQL (dealing/codeal_claim.py) through what an honest replica
meets: a restart in a re-created container (a new host name), a claim row gone (a restore, a
failover), a connection the database dropped, a renewal that hangs, a twin under one name and data
dir, and a restore of its own pre-upgrade backup. The claim functions in process on a real
PostgreSQL cluster (one per session)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from fairdeck_server.dealing import codeal_claim
from fairdeck_server.dealing.codeal_claim import ClaimRefused, CodealClaim, Holder
from fairdeck_server.dealing.codeal_health import CodealerWatch
from fairdeck_server.dealing.codeal_record import Record
from fairdeck_server.run.config import ConfigError, load
from tests.support.env import clean_env
from tests.support.waits import wait_for, wait_for_async

PATH = Path("/data/codeal.db")


def claimed(url: str, holder: Holder, record_id: str = "a" * 32) -> CodealClaim:
    claim = CodealClaim(url, PATH, Record(record_id, "k+1", False), holder)
    claim.claim(list)
    return claim


@pytest.mark.light
def test_a_restart_in_a_recreated_container_is_told_its_host_name_changed_not_that_it_is_a_copy(
    pg_url: str,
) -> None:
    claimed(pg_url, Holder("7f3a9c0d1e2b", "/data", "i1"))
    with pytest.raises(ClaimRefused) as refused:
        claimed(pg_url, Holder("b81e44f0a9c2", "/data", "i2"))
    said = str(refused.value)
    assert "the host name changed (7f3a9c0d1e2b -> b81e44f0a9c2)" in said and "\n" not in said
    assert "--take-over" in said and "--replica-name" in said and "a copy" not in said
    first = Holder.here(Path("/data"), "dealer-1")  # a stable name: the new container is the same holder
    claimed(pg_url, first, "b" * 32)
    claimed(pg_url, Holder.here(Path("/data"), "dealer-1"), "b" * 32)
    assert first.host == "dealer-1"


def test_replica_name_is_an_option_checked_as_one_printable_line() -> None:
    env = {
        "FAIRDECK_LISTEN": "127.0.0.1:0",
        "FAIRDECK_CODEALER": "127.0.0.1:1",
        "FAIRDECK_DB": "postgresql://x/y",
    }
    assert load({}, {**env, "FAIRDECK_REPLICA_NAME": "dealer-1"}).server.replica_name == "dealer-1"
    for bad in ("a\nb", "x" * 65, " pad"):
        with pytest.raises(ConfigError) as refused:
            load({"replica_name": bad}, env)
        assert "replica" in str(refused.value) and "\n" not in str(refused.value)


def test_a_claim_row_gone_is_claimed_again_not_reported_held_by_no_replica_forever(pg_url: str) -> None:
    claim = claimed(pg_url, Holder("h", "/d", "i-C"))
    assert claim.renew() is None
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("DELETE FROM codeal_claims")
    assert claim.renew() is None and claim.renew() is None
    with psycopg.connect(pg_url, autocommit=True) as db:
        assert db.execute("SELECT instance FROM codeal_claims").fetchall() == [("i-C",)]
        db.execute("DELETE FROM codeal_claims")
    claimed(pg_url, Holder("other", "/elsewhere", "i-X"))  # another took it while the row was gone
    lost = claim.renew()
    assert lost is not None and "other:/elsewhere" in lost
    claim.release()


def test_a_renewal_after_the_database_dropped_its_connection_tries_a_fresh_one(pg_url: str) -> None:
    claim = claimed(pg_url, Holder("h", "/d", "i-D"))
    assert claim.renew() is None
    with psycopg.connect(pg_url, autocommit=True) as db:  # as a database restart drops it
        db.execute("SELECT pg_terminate_backend(%s)", (claim._conn.info.backend_pid,))
    assert claim.renew() is None
    assert claim._conn.execute("SHOW statement_timeout").fetchone() == ("5s",)  # never hangs there
    claim.release()


def test_a_hung_renewal_makes_codealt_health_say_it_cannot_confirm(tmp_path: Path) -> None:
    gate = threading.Event()
    key = b"k" * 32

    async def identity() -> bytes:
        return key

    async def publish(ok: bool) -> None:
        return None

    def hung() -> str | None:
        gate.wait(10)
        return None

    async def scene() -> tuple[str | None, str | None]:
        watch = CodealerWatch(identity, key, publish, held=hung)
        watch.held_timeout = 0.2
        await asyncio.wait_for(watch.round(), 5)
        hanging = watch.cause
        gate.set()
        await asyncio.wait_for(watch.round(), 30)
        return hanging, watch.cause

    try:
        hanging, after = asyncio.run(scene())
    finally:
        gate.set()
    assert hanging is not None and "cannot confirm" in hanging
    assert after is None


def test_a_live_twin_under_the_same_name_and_data_dir_is_refused_a_dead_one_is_not(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codeal_claim, "STALE_S", 1.0)
    first = claimed(pg_url, Holder("dealer", "/data", "i-A"))
    stop = threading.Event()

    def renewing() -> None:
        while not stop.wait(0.2):
            first.renew()

    renewer = threading.Thread(target=renewing, daemon=True)
    renewer.start()
    try:
        with pytest.raises(ClaimRefused) as refused:
            claimed(pg_url, Holder("dealer", "/data", "i-B"))
    finally:
        stop.set()
        renewer.join(10)
    assert "another live process" in str(refused.value) and "--replica-name" in str(refused.value)
    claimed(pg_url, Holder("dealer", "/data", "i-C"))  # the first no longer renews: a restart
    assert first.renew() is not None
    first.release()


def test_a_restore_of_a_replicas_own_pre_upgrade_backup_is_said_so_and_taken_over_knowingly(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codeal_claim, "STALE_S", 0.5)
    place = Holder("h", "/d4", "i-1")
    CodealClaim(pg_url, PATH, Record("1" * 32, "k+1", True), place).claim(lambda: ["h1", "h2"])
    restored = Record("3" * 32, "k+1", True)  # the same older file, upgraded again after a restore
    with pytest.raises(ClaimRefused) as refused:
        CodealClaim(pg_url, PATH, restored, Holder("h", "/d4", "i-3")).claim(lambda: ["h1"])
    said = str(refused.value)
    assert "this same replica" in said and "--take-over" in said and "two copies" not in said, said
    with psycopg.connect(pg_url, autocommit=True) as db:  # its old process silent past STALE_S
        db.execute("UPDATE codeal_claims SET seen_ms = seen_ms - 60000")
    CodealClaim(pg_url, PATH, restored, Holder("h", "/d4", "i-4")).claim(lambda: ["h1"], take_over=True)
    with pytest.raises(ClaimRefused):  # the file it replaced, back: refused now
        CodealClaim(pg_url, PATH, Record("1" * 32, "k+1", True), Holder("x", "/e", "i-5")).claim(
            lambda: ["h1"]
        )


def test_init_take_over_checks_its_replica_name_in_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "fairdeck.cli", "init", "--codeal-record", "--take-over"]
    command += ["--db", "postgresql://127.0.0.1:1/x", "--data", str(tmp_path), "--replica-name", "a\tb"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env())
    assert done.returncode == 2 and done.stderr.startswith("fairdeck init: --replica-name: "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_take_over_with_no_log_key_is_refused_not_claimed_unchecked(tmp_path: Path, pg_url: str) -> None:
    """``init --codeal-record --take-over`` in a data dir with no log key (the replicas' key given
    by --log-key-file elsewhere, the option left out) skipped the check that the record belongs to
    this log, and claimed a file of another log on the database. Refused now in one line naming the
    key file and the option; a key file there that cannot be used is refused with its own fix, the
    option not named. Nothing is claimed either way."""
    from fairdeck_server.dealing.codeal_store import create_record
    from fairdeck_server.publishing.log_signing import load_or_create_signer

    claimed(pg_url, Holder("other", "/elsewhere", "i-0"), "e" * 32)  # the claims' table, with a row
    data = tmp_path / "data"
    data.mkdir()
    record = create_record(data / "codeal.db", ["another.example/log+0badc0de+AAAA"])
    command = [sys.executable, "-m", "fairdeck.cli", "init", "--codeal-record", "--take-over"]
    command += ["--db", pg_url, "--data", str(data)]

    def refused() -> str:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env())
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith("fairdeck init: --take-over checks the record against its log's key, and "), (
            line
        )
        with psycopg.connect(pg_url, autocommit=True) as db:
            claims = db.execute("SELECT record_id FROM codeal_claims").fetchall()
        assert claims == [("e" * 32,)], claims
        return line

    line = refused()
    assert f"no log key at {data / 'log.key'}; give --log-key-file PATH" in line, line
    load_or_create_signer(data / "log.key", "fairdeck.test/take-over")
    (data / "log.key").chmod(0o644)
    line = refused()
    assert "readable by others" in line and "chmod 600" in line and "--log-key-file" not in line, line
    assert record.record_id not in line


@pytest.mark.light
def test_a_clean_restart_waited_6_s_at_its_own_claim_a_crashed_one_still_waits(pg_url: str) -> None:
    """A clean stop (``let_go``) left the claim as a crash does, so the next start of the same
    replica waited out STALE_S (its process before renewed it just now). Released now, it is taken
    at once; unreleased (a kill -9), the start still waits, and a live twin is still refused
    (test_a_live_twin_under_the_same_name_and_data_dir_is_refused_a_dead_one_is_not)."""
    first = claimed(pg_url, Holder("dealer", "/data5", "i-A"), "5" * 32)
    assert first.renew() is None
    first.let_go()
    started = time.monotonic()
    second = claimed(pg_url, Holder("dealer", "/data5", "i-B"), "5" * 32)
    assert time.monotonic() - started < codeal_claim.STALE_S / 2
    assert second.renew() is None  # then it dies without letting go
    second.release()
    started = time.monotonic()
    claimed(pg_url, Holder("dealer", "/data5", "i-C"), "5" * 32)
    assert time.monotonic() - started >= codeal_claim.STALE_S - 1.0


def test_a_released_claim_is_renewed_by_no_one_and_taken_over_at_once(pg_url: str) -> None:
    claim = claimed(pg_url, Holder("h", "/d6", "i-1"), "6" * 32)
    claim.let_go()
    lost = claim.renew()  # a stopped process's renewal (a thread still in flight) takes nothing back
    assert lost is not None and "let go its claim" in lost
    assert claim._conn is None and claim.unconfirmed() is not None  # nor reconnects, nor vouches
    with psycopg.connect(pg_url, autocommit=True) as db:
        row = db.execute("SELECT instance FROM codeal_claims WHERE record_id = %s", ("6" * 32,)).fetchone()
        assert row == ("",)
    moved = CodealClaim(pg_url, PATH, Record("6" * 32, "k+1", False), Holder("h2", "/e6", "i-2"))
    moved.claim(list, take_over=True)  # its holder stopped cleanly: no 6 s of silence to wait
    assert moved.renew() is None and moved.unconfirmed() is None


def test_a_claim_made_again_after_a_restore_forgot_an_upgraded_records_hands(pg_url: str) -> None:
    """A database restored to before an upgraded record's first claim loses its claim row and its
    hand rows (codeal_claimed_hands). Its holder's renewal made the claim again but not the hands,
    and so did a take-over: a second copy of the older file then passed. Both make them again."""
    upgraded = Record("7" * 32, "k+1", True)
    held = ["u1", "u2"]
    claim = CodealClaim(pg_url, PATH, upgraded, Holder("h", "/d7", "i-1"))
    claim.claim(lambda: held)

    def restore(*tables: str) -> None:
        with psycopg.connect(pg_url, autocommit=True) as db:
            for table in tables:
                db.execute(f"DELETE FROM {table}")

    def hand_rows() -> list[tuple[str, str]]:
        with psycopg.connect(pg_url, autocommit=True) as db:
            rows = db.execute("SELECT hand_id, record_id FROM codeal_claimed_hands ORDER BY hand_id")
            return [(str(h), str(r)) for h, r in rows.fetchall()]

    restore("codeal_claims", "codeal_claimed_hands")
    assert claim.renew() is None
    assert hand_rows() == [("u1", "7" * 32), ("u2", "7" * 32)]
    copy = CodealClaim(pg_url, PATH, Record("8" * 32, "k+1", True), Holder("x", "/e7", "i-2"))
    with pytest.raises(ClaimRefused) as refused:
        copy.claim(lambda: ["u2"])
    assert "two copies of one older codeal.db" in str(refused.value)
    restore("codeal_claimed_hands")  # the claim row there without them (made again by an older renewal)
    claim.release()
    CodealClaim(pg_url, PATH, upgraded, Holder("h", "/d7", "i-3")).claim(lambda: held, take_over=True)
    assert hand_rows() == [("u1", "7" * 32), ("u2", "7" * 32)]


def test_a_claim_is_unconfirmed_once_no_renewal_was_confirmed_for_a_round_and_a_margin(
    pg_url: str,
) -> None:
    now = [100.0]
    claim = CodealClaim(pg_url, PATH, Record("9" * 32, "k+1", False), Holder("h", "/d9", "i-1"))
    claim.clock = lambda: now[0]
    assert claim.unconfirmed() is not None  # never claimed
    claim.claim(list)
    assert claim.unconfirmed() is None
    now[0] += codeal_claim.VOUCH_S
    said = claim.unconfirmed()
    assert said is not None and "cannot confirm" in said and "9" * 32 in said and "\n" not in said
    assert "refused" in said and "no renewal was attempted" in said, said  # none sent: not "unanswered"
    assert "the database has not answered" not in said and "wait" not in said, said
    assert codeal_claim.VOUCH_S < codeal_claim.STALE_S
    assert claim.renew() is None and claim.unconfirmed() is None
    claim.release()


def test_a_slow_codealer_identity_delayed_renewals_until_codealt_calls_were_refused(pg_url: str) -> None:
    """Renewals ran inside the co-dealt health round, after the probe and the co-dealer's identity
    call: an identity answer over ~2 s left the claim unconfirmed for ``VOUCH_S`` and honest calls
    refused "the database has not answered" while PostgreSQL was fine. Renewals run on their own
    thread now: a round stuck on the identity call (never answering here) delays none of them."""
    now = [100.0]
    claim = CodealClaim(pg_url, PATH, Record("c" * 32, "k+1", False), Holder("h", "/dc", "i-1"))
    claim.clock = lambda: now[0]
    claim.claim(list)
    answers: list[str | None] = []
    stuck = threading.Event()
    key = b"k" * 32

    async def identity() -> bytes:
        stuck.set()
        await asyncio.Event().wait()  # the co-dealer never answers
        return key

    async def publish(ok: bool) -> None:
        return None

    async def scene() -> None:
        watch = CodealerWatch(identity, key, publish, held=claim.unconfirmed)
        claim.start_renewals(answers.append, every=0.01)
        round_ = asyncio.ensure_future(watch.round())
        await asyncio.to_thread(wait_for, "the round waiting on the co-dealer", stuck.is_set)
        for _ in range(3):  # each step under VOUCH_S; the round still waits on the identity
            now[0] += codeal_claim.VOUCH_S - 0.5
            await asyncio.to_thread(wait_for, "a renewal on its own", lambda: claim.confirmed == now[0])
            assert claim.unconfirmed() is None
        assert not round_.done()
        round_.cancel()

    try:
        asyncio.run(scene())
    finally:
        claim.let_go()
    assert answers and set(answers) == {None}
    assert codeal_claim.RENEW_EVERY * 3 < codeal_claim.VOUCH_S < codeal_claim.STALE_S


def test_a_restore_to_a_moment_its_claim_was_released_made_the_live_holder_stop_codealing(
    pg_url: str,
) -> None:
    """A database restored (or failed over) to a moment this replica's claim was marked released
    (a clean stop before this start) left the live holder's renewals saying it was "now held by the
    replica at" itself, and co-dealt calls refused until a restart. Its renewal takes it back."""
    claim = claimed(pg_url, Holder("h", "/dr", "i-live"), "d" * 32)
    assert claim.renew() is None
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("UPDATE codeal_claims SET instance = '' WHERE record_id = %s", ("d" * 32,))
    assert claim.renew() is None
    with psycopg.connect(pg_url, autocommit=True) as db:
        row = db.execute("SELECT instance FROM codeal_claims WHERE record_id = %s", ("d" * 32,)).fetchone()
    assert row == ("i-live",)
    with psycopg.connect(pg_url, autocommit=True) as db:  # released by another place: not taken
        moved = "UPDATE codeal_claims SET instance = '', data_dir = '/other' WHERE record_id = %s"
        db.execute(moved, ("d" * 32,))
    lost = claim.renew()
    assert lost is not None and "h:/other" in lost
    claim.release()


def test_two_starts_of_one_replica_both_took_its_released_claim(pg_url: str) -> None:
    """Two processes under one replica name and data dir path (twins) starting together both saw
    the claim released, and both took it, the second overwriting the first. The claim is now a
    compare-and-set under its lock: the row changed since this start looked at it is a twin's."""
    record = Record("e" * 32, "k+1", False)
    claimed(pg_url, Holder("h", "/dt", "i-0"), "e" * 32).let_go()
    first = CodealClaim(pg_url, PATH, record, Holder("h", "/dt", "i-1"))
    second = CodealClaim(pg_url, PATH, record, Holder("h", "/dt", "i-2"))
    look = second._wait_out_twin

    def looked_then_first_starts(conn: psycopg.Connection) -> object:
        seen = look(conn)
        first.claim(list)  # between the second's look and its locked claim
        return seen

    second._wait_out_twin = looked_then_first_starts  # type: ignore[method-assign]
    with pytest.raises(ClaimRefused) as refused:
        second.claim(list)
    said = str(refused.value)
    assert "another live process under this same replica name" in said and "\n" not in said, said
    assert first.renew() is None
    first.let_go()


def test_an_unforeseen_error_in_a_renewal_ended_the_renewals_for_good(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An error no renewal foresees (here from the code told each answer) ended the renewal
    thread with a thread traceback, and co-dealt calls were refused until a restart. It is one
    ERROR line, the claim counts as unconfirmed meanwhile, and the renewals go on."""
    claim = claimed(pg_url, Holder("h", "/du", "i-u"), "e" * 32)
    answers: list[str | None] = []

    def told(why: str | None) -> None:
        if not answers:
            answers.append("raised")
            raise RuntimeError("the code told each answer failed once")
        answers.append(why)

    try:
        with caplog.at_level(logging.ERROR):
            claim.start_renewals(told, every=0.01)
            wait_for("a renewal after the error", lambda: len(answers) >= 3)
    finally:
        claim.let_go()
    assert answers[1:3] == [None, None]
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 1 and "a claim renewal failed: RuntimeError" in said[0], said
    assert not any(r.exc_info for r in caplog.records)


def test_codealt_health_watchers_heard_of_a_lapsed_claim_only_at_the_next_round() -> None:
    """A lapsed claim was found by the next health round, up to 2 s after co-dealt calls were
    refused: Watch streams, the log line and ``fairdeck_codealer_healthy`` said SERVING meanwhile.
    A round is now due the moment the claim lapses (``vouched_for``, the deadline ``unconfirmed``
    reads), however long its rounds' period: here a minute, and it says so within a second."""
    claim = CodealClaim("postgresql://unused", PATH, Record("e" * 32, "k+1", False), Holder("h", "/dw", "i"))
    claim.confirmed = time.monotonic() - codeal_claim.VOUCH_S + 0.3  # lapses 0.3 s from now
    lapses_at = claim.confirmed + codeal_claim.VOUCH_S
    said: list[tuple[bool, float]] = []
    key = b"k" * 32

    async def identity() -> bytes:
        return key

    async def publish(ok: bool) -> None:
        said.append((ok, time.monotonic()))

    async def scene() -> None:
        watch = CodealerWatch(
            identity, key, publish, every=60, held=claim.unconfirmed, lapses=claim.vouched_for
        )
        watch.start()
        try:
            await wait_for_async("co-dealt health NOT_SERVING", lambda: said and not said[-1][0], timeout=10)
        finally:
            await watch.stop()

    asyncio.run(scene())
    assert said[0][0] is True and said[-1][0] is False
    assert lapses_at <= said[-1][1] < lapses_at + 1.0, (said, lapses_at)
    assert "no renewal of its claim confirmed" in (claim.unconfirmed() or "")
