"""Directories the co-dealer's and the dealer's operators did not make, or made under a loose umask:
the files holding co-dealt hands are the owner's only, and a co-dealer's ledger is served only
beside the identity key and secrets key it belongs to. Real processes, real SQLite files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, seat_releases
from fairdeck.v1 import codealer_pb2
from tests.support.codealers import CodealerProcess, init_codealer, init_codealer_cli
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker

LISTEN = ("--listen", "127.0.0.1:0")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The umask most hosts run with: files SQLite makes are 0644 unless fairdeck says otherwise."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def serve_refused(forker: ServeForker, directory: Path) -> str:
    """``fairdeck codealer serve --dir DIR`` refused (forked: a fresh process, its whole output):
    its one line (exit 2, no traceback)."""
    out = forker.run(["codealer", "serve", "--dir", str(directory), *LISTEN], timeout=60)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    return out.stderr.strip()


def announce(codealer: CodealerProcess, hand_id: str) -> None:
    request = codealer_pb2.AnnounceHandRequest(hand_id=hand_id, deck="standard", holder=1, holder_count=2)
    codealer.stub().AnnounceHand(request, timeout=60)


def test_codealt_sqlite_files_were_world_readable_now_0600_on_both_sides(
    tmp_path: Path, loose_umask: None, serve_forker: ServeForker
) -> None:
    """codealer.db (the co-dealer's sealed per-hand secrets, every seat key each position went to)
    and the dealer's codeal.db (its sealed per-hand secrets, the seats) and their -wal and -shm
    were made 0644 under the usual umask, while fairdeck.db beside them is 0600."""
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        dealer = DealerProcess(
            tmp_path / "data", tmp_path / "dealer.log", *codealer.dealer_flags(), forker=serve_forker
        )
        with dealer, DealerClient(dealer.target, timeout=60) as client:
            hands = CodealHands(client)
            hand = hands.open_hand("standard")
            seat = SeatKey.generate()
            got = hands.draw(hand.hand_id, 2, seat_public_key=seat.public_key)
            for directory, name in ((tmp_path / "cd1", "codealer.db"), (tmp_path / "data", "codeal.db")):
                for suffix in ("", "-wal", "-shm"):
                    path = directory / f"{name}{suffix}"
                    assert mode(path) == 0o600, f"{path} is {mode(path):04o}"
            hands.close_hand(hand.hand_id, seat_releases=seat_releases(hand, got.sealed_cards, seat))
    os.chmod(tmp_path / "cd1" / "codealer.db", 0o644)  # a ledger made by an older fairdeck
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        assert mode(tmp_path / "cd1" / "codealer.db") == 0o600
        log = codealer.stop()
    assert "codealer.db was mode 0644: now 0600" in log


def test_a_ledger_of_another_codealer_was_served_beside_this_ones_key_now_refused_naming_it(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """A restore that mixed two co-dealers' files (codealer.db of one, codealer.key of another)
    started and answered that ledger's hands with a key record signed by another identity than
    the one it announced. Now the ledger names its owner and serve refuses the mix in one line."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    mine_key, theirs_key = init_codealer(mine), init_codealer(theirs)
    with CodealerProcess(theirs, forker=serve_forker) as codealer:
        announce(codealer, "hand-of-theirs")
    shutil.copy(theirs / "codealer.db", mine / "codealer.db")
    line = serve_refused(serve_forker, mine)
    assert line.startswith("fairdeck codealer serve: co-dealer ledger ") and "codealer.db" in line, line
    assert theirs_key in line and mine_key in line and "backup" in line, line


def test_a_ledger_made_before_its_owner_was_kept_is_checked_by_its_hands_signatures(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """An older ledger names no owner: its newest hand's signature says whose it is."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    init_codealer(mine)
    init_codealer(theirs)
    with CodealerProcess(theirs, forker=serve_forker) as codealer:
        announce(codealer, "hand-of-theirs")
    db = sqlite3.connect(theirs / "codealer.db", isolation_level=None)
    db.execute("DROP TABLE IF EXISTS owner")  # as an older fairdeck made it
    db.close()
    shutil.copy(theirs / "codealer.db", mine / "codealer.db")
    line = serve_refused(serve_forker, mine)
    assert "holds hands another co-dealer signed" in line and "codealer.key" in line, line
    shutil.copy(theirs / "codealer.key", mine / "codealer.key")  # the key matches; the secrets key does not
    line = serve_refused(serve_forker, mine)
    assert line.startswith(f"fairdeck codealer serve: secrets key file {mine / 'secrets.key'} "), line
    shutil.copy(theirs / "secrets.key", mine / "secrets.key")  # all of one co-dealer: served, and claimed
    with CodealerProcess(mine, forker=serve_forker) as codealer:
        announce(codealer, "hand-of-theirs")
    db = sqlite3.connect(mine / "codealer.db")
    assert db.execute("SELECT identity_key FROM owner").fetchone()[0].hex() == codealer.identity
    db.close()


def test_the_init_console_script_makes_the_owners_only_files_prints_the_key_and_never_replaces(
    tmp_path: Path, loose_umask: None, serve_forker: ServeForker
) -> None:
    """The other tests make their co-dealers by init's own function in-process; this one runs the
    console script: the identity key on stdout (the one serve announces), the four files 0600 under
    the usual umask, and a second init in the same dir refused in one line, nothing replaced."""
    directory = tmp_path / "cd1"
    made = init_codealer_cli(directory)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert len(key) == 64 and "dealer.token" in made.stderr, (made.stdout, made.stderr)
    for name in ("codealer.key", "secrets.key", "codealer.db", "dealer.token"):
        assert mode(directory / name) == 0o600, f"{name} is {mode(directory / name):04o}"
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    again = init_codealer_cli(directory)
    assert again.returncode == 2 and "Traceback" not in again.stderr, again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and "never replaced" in again.stderr, again.stderr
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    with CodealerProcess(directory, forker=serve_forker) as codealer:
        assert codealer.identity == key


@pytest.mark.parametrize("name", ["codealer.key", "secrets.key", "dealer.token"])
def test_a_directory_or_binary_file_in_place_of_a_codealer_key_file_was_a_traceback(
    tmp_path: Path, name: str, serve_forker: ServeForker
) -> None:
    """os.fdopen raised IsADirectoryError before the regular-file check, so a directory in a key
    file's place ended in a traceback; bytes that are not UTF-8 were quoted as a codec error."""
    directory = tmp_path / "cd1"
    init_codealer(directory)
    (directory / name).unlink()
    (directory / name).mkdir()
    line = serve_refused(serve_forker, directory)
    assert f"{directory / name} is not a regular file; put the key file itself there" in line, line
    (directory / name).rmdir()
    (directory / name).write_bytes(b"\xff\xfe\x00")
    os.chmod(directory / name, 0o600)
    line = serve_refused(serve_forker, directory)
    assert f"{directory / name} is not text: put the key file itself there" in line, line


def test_a_dealers_codealer_token_naming_a_directory_was_a_traceback(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    key = init_codealer(tmp_path / "cd1")
    flags = ("--codealer", "127.0.0.1:1", "--codealer-key", key, "--codealer-token", f"@{tmp_path}")
    out = serve_forker.run(["serve", "--data", str(tmp_path / "data"), *LISTEN, *flags], timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"fairdeck serve: --codealer-token: token file {tmp_path} is not a regular file; "
        "put the key file itself there"
    )


@pytest.mark.parametrize("damage", ["emptied", "another_database"])
def test_an_emptied_or_foreign_codeal_db_was_given_a_fresh_schema_forgetting_open_hands(
    tmp_path: Path, damage: str, serve_forker: ServeForker
) -> None:
    """The dealer's codeal.db holds its sealed key and seed of every co-dealt hand. Emptied (a
    failed restore, a full disk) or swapped for another SQLite file, it was given a fresh schema at
    start: every open co-dealt hand forgotten, never to be closed. As the co-dealer's ledger, it is
    refused in one line."""
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        flags = codealer.dealer_flags()
        dealer = DealerProcess(tmp_path / "data", tmp_path / "dealer.log", *flags, forker=serve_forker)
        with dealer, DealerClient(dealer.target, timeout=60) as client:
            CodealHands(client).open_hand("standard")
    db = tmp_path / "data" / "codeal.db"
    for extra in ("codeal.db-wal", "codeal.db-shm"):
        (tmp_path / "data" / extra).unlink(missing_ok=True)
    db.unlink()
    if damage == "emptied":
        db.write_bytes(b"")
    else:
        other = sqlite3.connect(db)
        other.execute("CREATE TABLE notes (x TEXT)")
        other.commit()
        other.close()
    before = db.read_bytes()
    try:
        out = serve_forker.run(["serve", "--data", str(tmp_path / "data"), *LISTEN, *flags], timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the dealer served with a codeal.db that forgot its co-dealt hands")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fairdeck serve: co-dealt hands {db}") and "restore it from backup" in last, last
    assert db.read_bytes() == before


def serve_codealer(
    forker: ServeForker, data: Path, flags: tuple[str, ...]
) -> subprocess.CompletedProcess[str]:
    """``fairdeck serve --data DATA`` with the co-dealer ``flags`` (forked), expected to refuse at once."""
    try:
        return forker.run(["serve", "--data", str(data), *LISTEN, *flags], timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the dealer served with a new codeal.db beside a log of co-dealt hands")


def test_a_deleted_codeal_db_was_silently_recreated_forgetting_open_hands(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """Deleted (not emptied), codeal.db was made afresh at start: every open co-dealt hand forgotten.
    The log's co-dealt entries say hands were dealt: refused in one line naming the file and the
    fixes, nothing made; ``fairdeck init --codeal-record`` makes a new one knowingly, once."""
    data = tmp_path / "data"
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        flags = codealer.dealer_flags()
        dealer = DealerProcess(data, tmp_path / "dealer.log", *flags, forker=serve_forker)
        with dealer, DealerClient(dealer.target, timeout=60) as client:
            CodealHands(client).open_hand("standard")
    db = data / "codeal.db"
    for name in ("codeal.db", "codeal.db-wal", "codeal.db-shm"):
        (data / name).unlink(missing_ok=True)
    out = serve_codealer(serve_forker, data, flags)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fairdeck serve: co-dealt hands {db} is missing but the log of database "), last
    assert "restore it from backup" in last and f"`fairdeck init --codeal-record --data {data}`" in last, last
    assert not db.exists()
    init = ["init", "--codeal-record", "--data", str(data)]
    made = serve_forker.run(init, timeout=60)
    assert made.returncode == 0 and db.exists(), made.stderr
    again = serve_forker.run(init, timeout=60)
    assert again.returncode == 2 and "already exists" in again.stderr, again.stderr
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        dealer = DealerProcess(data, tmp_path / "dealer2.log", *codealer.dealer_flags(), forker=serve_forker)
        with dealer, DealerClient(dealer.target, timeout=60) as client:
            CodealHands(client).open_hand("standard")
