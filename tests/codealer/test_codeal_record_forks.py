"""A co-dealt hands' file (codeal.db) is an identity: a copy served by a second dealer would make two
dealers hold, and close, the same hands. A copy beside another log (SQLite) or presented by a second
replica of one PostgreSQL database is refused at start in one line; a restart of the same replica is
not; an older file without a record id gets one once, said in the log, unless its hands were
logged to another log than the one beside it. Real ``fairdeck serve`` and
``fairdeck codealer serve`` processes, real SQLite files, a real PostgreSQL database."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands
from fairdeck_server.dealing.vault import load_or_create_key
from fairdeck_server.publishing.log_signing import load_or_create_signer
from tests.support.codealers import CodealerProcess, init_codealer, online_copy
from tests.support.dealers import DealerProcess
from tests.support.env import clean_env
from tests.support.forked_serve import ServeForker

LISTEN = ("--listen", "127.0.0.1:0")


def serve_refused(forker: ServeForker, data: Path, *flags: str) -> str:
    """``fairdeck serve --data DATA FLAGS`` (forked: a fresh process, its whole output), expected
    to refuse at once: its one refusal line."""
    try:
        out = forker.run(["serve", "--data", str(data), *LISTEN, *flags], timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the dealer served a copy of another dealer's codeal.db")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    refusals = [line for line in out.stderr.splitlines() if line.startswith("fairdeck serve: ")]
    assert len(refusals) == 1 and out.stderr.strip().splitlines()[-1] == refusals[0], out.stderr
    return refusals[0]


def open_codeal(target: str) -> str:
    with DealerClient(target, timeout=60) as client:
        return str(CodealHands(client).open_hand("standard").hand_id)


@pytest.fixture
def codealer(tmp_path: Path, serve_forker: ServeForker) -> Iterator[CodealerProcess]:
    init_codealer(tmp_path / "cd")
    with CodealerProcess(tmp_path / "cd", forker=serve_forker) as process:
        yield process


def replica_flags(tmp_path: Path, url: str, codealer: CodealerProcess) -> tuple[str, ...]:
    """Flags of a replica on ``url`` with the shared keys (made once) and the co-dealer."""
    seed_key, log_key = tmp_path / "seed.key", tmp_path / "log.key"
    if not seed_key.exists():
        load_or_create_key(seed_key, environ={})
        load_or_create_signer(log_key, "fairdeck.test/codeal-record")
    keys = ("--seed-key-file", str(seed_key), "--log-key-file", str(log_key))
    return ("--db", url, *keys, "--log-level", "INFO", *codealer.dealer_flags())


def test_a_copy_of_another_replicas_codeal_db_was_served_silently(
    tmp_path: Path, pg_url: str, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """Replica B started with a copy of replica A's codeal.db served A's co-dealt hands beside A: a
    fork of the record nothing detected. Now B is refused in one line naming the file and the
    fixes, while A runs and after it stopped; A restarted in its own dir is not refused."""
    flags = replica_flags(tmp_path, pg_url, codealer)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()  # as a replica's operator makes it (before, serve did not on PostgreSQL)
    with DealerProcess(a_dir, tmp_path / "a.log", *flags, forker=serve_forker) as a:
        opened = open_codeal(a.target)
        b_dir.mkdir()
        online_copy(a_dir / "codeal.db", b_dir / "codeal.db")
        line = serve_refused(serve_forker, b_dir, *flags)
        assert line.startswith(f"fairdeck serve: co-dealt hands {b_dir / 'codeal.db'} is record "), line
        assert "which the replica at " in line and str(a_dir.resolve()) in line, line
        assert "fairdeck init --codeal-record" in line and "--take-over" in line, line
        assert pg_url not in line
    line_down = serve_refused(serve_forker, b_dir, *flags)  # A stopped: still another replica's record
    assert f"co-dealt hands {b_dir / 'codeal.db'} is record " in line_down, line_down
    # A restart of A: its own record.
    a = DealerProcess(a_dir, tmp_path / "a2.log", *flags, forker=serve_forker)
    with a, DealerClient(a.target, timeout=60) as client:
        hands = CodealHands(client)
        hands.close_hand(opened)
        hands.open_hand("standard")
    assert "Traceback" not in (tmp_path / "a2.log").read_text()


def test_two_copies_of_one_older_codeal_db_got_two_record_ids_and_both_served(
    tmp_path: Path, pg_url: str, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """Two copies of a codeal.db made before record ids would each get a new id at their upgrade
    and pass the claim of records: the first claim of an upgraded record claims its hands too, so
    the second copy is refused, naming a hand both hold."""
    flags = replica_flags(tmp_path, pg_url, codealer)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()  # as a replica's operator makes it (before, serve did not on PostgreSQL)
    with DealerProcess(a_dir, tmp_path / "a.log", *flags, forker=serve_forker) as a:
        opened = open_codeal(a.target)
    make_older(a_dir / "codeal.db")
    b_dir.mkdir()
    online_copy(a_dir / "codeal.db", b_dir / "codeal.db")
    with DealerProcess(a_dir, tmp_path / "a2.log", *flags, forker=serve_forker):
        pass
    line = serve_refused(serve_forker, b_dir, *flags)
    assert f"co-dealt hands {b_dir / 'codeal.db'} (record " in line and "given at its upgrade" in line, line
    assert "two copies of one older codeal.db" in line, line
    assert f"holds hand {opened}, " in line, line


def test_a_take_over_upgraded_an_older_codeal_db_without_the_log_check_serve_makes(
    tmp_path: Path, pg_url: str, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """``init --codeal-record --take-over`` opened the file without the log look-up ``serve`` makes
    at an older file's upgrade: an older codeal.db whose hands the log does not hold (the log an
    older backup than the file, or another log's file) was given a record id and claimed, and the
    runbook said to let serve upgrade it first. The take-over now opens it as serve does and is
    refused in one line naming the file, the hand and the fix (exit 2); the file keeps no id."""
    flags = replica_flags(tmp_path, pg_url, codealer)
    data = tmp_path / "a"
    data.mkdir()
    with DealerProcess(data, tmp_path / "a.log", *flags, forker=serve_forker) as a:
        opened = open_codeal(a.target)
    make_older(data / "codeal.db")
    db = sqlite3.connect(data / "codeal.db")
    try:  # its opening noted at an entry the log does not reach: the log is behind the file
        db.execute(
            "UPDATE codeal_hands SET public = json_set(public, '$.log.open', 999999) WHERE hand_id = ?",
            (opened,),
        )
        db.commit()
    finally:
        db.close()
    command = [sys.executable, "-m", "fairdeck.cli", "init", "--codeal-record", "--take-over", "--db", pg_url]
    command += ["--data", str(data), "--log-key-file", str(tmp_path / "log.key")]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env())
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    (line,) = out.stderr.strip().splitlines()
    head = f"fairdeck init: co-dealt hands {data / 'codeal.db'}, made by an older fairdeck (no record id"
    assert line.startswith(head), line
    assert (
        f"holds hand {opened}, logged at entry 999999 of its log, but the log of this data dir has no entry"
        in line
    )
    assert "put back this data dir's latest log" in line and pg_url not in line, line
    db = sqlite3.connect(f"file:{data / 'codeal.db'}?mode=ro", uri=True)
    try:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'codeal_record'").fetchone() is None
    finally:
        db.close()


def make_older(path: Path) -> None:
    """The file as a fairdeck before record ids left it: no codeal_record table."""
    db = sqlite3.connect(path)
    try:
        db.execute("DROP TABLE IF EXISTS codeal_record")
        db.commit()
    finally:
        db.close()


def test_codeal_db_copied_beside_another_log_was_served(
    tmp_path: Path, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """A codeal.db copied into another SQLite dealer's data dir (another log, another key) was
    served as that dealer's own record. It is refused in one line naming the file and the fix."""
    flags = (*codealer.dealer_flags(), "--log-level", "INFO")
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with DealerProcess(a_dir, tmp_path / "a.log", *flags, forker=serve_forker) as a:
        open_codeal(a.target)
    with DealerProcess(b_dir, tmp_path / "b.log", *flags, forker=serve_forker) as b:
        open_codeal(b.target)
    for name in ("codeal.db-wal", "codeal.db-shm"):
        (b_dir / name).unlink(missing_ok=True)
    online_copy(a_dir / "codeal.db", b_dir / "codeal.db")
    line = serve_refused(serve_forker, b_dir, *flags)
    assert line.startswith(f"fairdeck serve: co-dealt hands {b_dir / 'codeal.db'} (record "), line
    assert "belongs to another log" in line and f"fairdeck init --codeal-record --data {b_dir}" in line, line


def test_two_copies_of_one_older_codeal_db_beside_two_logs_were_each_bound_to_their_own(
    tmp_path: Path, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """SQLite: a codeal.db of a fairdeck before record ids names no log, so a copy put beside
    another dealer's log was given an id and bound to that log at its upgrade, as the original was
    to its own: two dealers holding the same hands. Its hands name the log index their opening
    was logged at; beside another log that entry is not theirs, and the copy is refused in one
    line naming the file, a hand and the fix, while the original upgrades and serves."""
    flags = (*codealer.dealer_flags(), "--log-level", "INFO")
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with DealerProcess(a_dir, tmp_path / "a.log", *flags, forker=serve_forker) as a:
        opened = open_codeal(a.target)
    with DealerProcess(b_dir, tmp_path / "b.log", *flags, forker=serve_forker) as b:
        open_codeal(b.target)
    make_older(a_dir / "codeal.db")
    for name in ("codeal.db", "codeal.db-wal", "codeal.db-shm"):
        (b_dir / name).unlink(missing_ok=True)
    online_copy(a_dir / "codeal.db", b_dir / "codeal.db")
    line = serve_refused(serve_forker, b_dir, *flags)
    head = f"fairdeck serve: co-dealt hands {b_dir / 'codeal.db'}, made by an older fairdeck (no record id"
    assert line.startswith(head), line
    assert f"holds hand {opened}, logged at entry " in line and "another dealer's data dir" in line, line
    assert f"fairdeck init --codeal-record --data {b_dir}`" in line, line
    # The original, beside its own log.
    a = DealerProcess(a_dir, tmp_path / "a2.log", *flags, forker=serve_forker)
    with a, DealerClient(a.target, timeout=60) as client:
        CodealHands(client).close_hand(opened)
    assert "without a record id" in (tmp_path / "a2.log").read_text()


def test_an_older_codeal_db_is_given_a_record_id_once_and_said(
    tmp_path: Path, codealer: CodealerProcess, serve_forker: ServeForker
) -> None:
    """A codeal.db of a fairdeck before record ids is given one at its first start, in one WARNING
    naming the file and the id, and keeps it: the next start says nothing and the id is the same."""
    flags = (*codealer.dealer_flags(), "--log-level", "INFO")
    data = tmp_path / "data"
    with DealerProcess(data, tmp_path / "first.log", *flags, forker=serve_forker) as dealer:
        opened = open_codeal(dealer.target)
    make_older(data / "codeal.db")
    dealer = DealerProcess(data, tmp_path / "upgrade.log", *flags, forker=serve_forker)
    with dealer, DealerClient(dealer.target, timeout=60) as client:
        CodealHands(client).close_hand(opened)
    said = [
        line for line in (tmp_path / "upgrade.log").read_text().splitlines() if "without a record id" in line
    ]
    record = record_id(data / "codeal.db")
    assert len(said) == 1 and f"it is record {record}" in said[0] and str(data / "codeal.db") in said[0], said
    with DealerProcess(data, tmp_path / "again.log", *flags, forker=serve_forker):
        pass
    assert "without a record id" not in (tmp_path / "again.log").read_text()
    assert record_id(data / "codeal.db") == record


def record_id(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (value,) = db.execute("SELECT record_id FROM codeal_record").fetchone()
    finally:
        db.close()
    assert len(value) == 32
    return str(value)


@pytest.mark.parametrize("index", ["99999999999999999999", "9223372036854775808", "-1"])
def test_an_older_codeal_db_noting_an_index_past_any_log_crashed_serve(
    tmp_path: Path, codealer: CodealerProcess, serve_forker: ServeForker, index: str
) -> None:
    """An older codeal.db (damaged, or hostile) whose hand notes its opening logged at an index no
    log holds (past an int64: an OverflowError binding it) crashed `fairdeck serve` with a
    traceback at its upgrade. It is refused in one line naming the file, the hand and the fix."""
    flags = (*codealer.dealer_flags(), "--log-level", "INFO")
    data = tmp_path / "data"
    with DealerProcess(data, tmp_path / "first.log", *flags, forker=serve_forker) as dealer:
        opened = open_codeal(dealer.target)
    make_older(data / "codeal.db")
    db = sqlite3.connect(data / "codeal.db")
    try:
        db.execute(
            f"UPDATE codeal_hands SET public = json_set(public, '$.log.open', json('{index}')) "
            "WHERE hand_id = ?",
            (opened,),
        )
        db.commit()
    finally:
        db.close()
    line = serve_refused(serve_forker, data, *flags)
    assert line.startswith(f"fairdeck serve: co-dealt hands {data / 'codeal.db'}, made by an older"), line
    assert f"holds hand {opened}, noted as logged at entry " in line and "which no log holds" in line, line
