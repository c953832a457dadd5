"""The identity of a co-dealt hands' file (dealing/codeal_record.py) on a real SQLite file: made once
with the file, kept on reopening, bound to the log's key (or one the log rotated from), refused
beside another log's key, and given once, knowingly, to a file of an older fairdeck."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from fairdeck_server.dealing.codeal_store import CodealStore, CodealStoreLost, check_record, create_record

OLD_KEY, NEW_KEY, OTHER_KEY = "log.test+0a0a0a0a+AAAA", "log.test+0b0b0b0b+BBBB", "other.test+0c0c0c0c+CCCC"


def test_a_record_keeps_its_id_and_follows_its_log_through_a_rotation(tmp_path: Path) -> None:
    path = tmp_path / "codeal.db"
    made = create_record(path, [OLD_KEY])
    assert len(made.record_id) == 32 and made.log_key == OLD_KEY and not made.upgraded
    store = CodealStore(path, [NEW_KEY, OLD_KEY])  # the key file after a rotation: old one retired
    assert store.record == made
    store.close()


def test_a_record_beside_another_logs_key_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "codeal.db"
    made = create_record(path, [OLD_KEY])
    with pytest.raises(CodealStoreLost) as refused:
        CodealStore(path, [OTHER_KEY])
    message = str(refused.value)
    assert message.startswith(f"co-dealt hands {path} (record {made.record_id}) belongs to another log"), (
        message
    )
    assert f"fairdeck init --codeal-record --data {tmp_path}" in message


def test_an_unbound_record_is_bound_once_to_the_first_log_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "codeal.db"
    CodealStore(path).close()  # made with no log to bind to (an init before the log's key existed)
    store = CodealStore(path, [OLD_KEY])
    assert store.record.log_key == OLD_KEY
    store.close()
    with pytest.raises(CodealStoreLost):
        CodealStore(path, [OTHER_KEY])


def test_an_older_file_is_given_one_id_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "codeal.db"
    CodealStore(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE codeal_record")  # as a fairdeck before record ids left it
    db.commit()
    db.close()
    with caplog.at_level("WARNING"):
        first = CodealStore(path, [OLD_KEY])
        first.close()
        again = CodealStore(path, [OLD_KEY])
        again.close()
    said = [r.getMessage() for r in caplog.records if "without a record id" in r.getMessage()]
    assert len(said) == 1 and first.record.record_id in said[0] and str(path) in said[0], said
    assert first.record.upgraded and again.record == first.record


def rewrite(path: Path, sql: str, *args: object) -> None:
    db = sqlite3.connect(path)
    db.execute(sql, args)
    db.commit()
    db.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [("record_id", "x\ny" + "z" * 5000), ("record_id", "A" * 32), ("log_key", "no key\nat all")],
)
def test_a_forged_record_row_is_refused_in_one_short_line(tmp_path: Path, column: str, value: str) -> None:
    path = tmp_path / "codeal.db"
    create_record(path, [OLD_KEY])
    rewrite(path, f"UPDATE codeal_record SET {column} = ?", value)
    with pytest.raises(CodealStoreLost) as refused:
        CodealStore(path, [OLD_KEY])
    message = str(refused.value)
    assert "\n" not in message and len(message) < 400 and str(path) in message, message


def test_a_record_table_without_its_row_is_refused_not_given_a_new_identity(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "codeal.db"
    create_record(path, [OLD_KEY])
    rewrite(path, "DELETE FROM codeal_record")
    with caplog.at_level("WARNING"), pytest.raises(CodealStoreLost) as refused:
        CodealStore(path, [OLD_KEY])
    assert str(path) in str(refused.value) and "backup" in str(refused.value)
    assert not [r for r in caplog.records if "older fairdeck" in r.getMessage()]
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM codeal_record").fetchone() == (0,)
    db.close()


def test_a_dangling_codeal_db_link_is_refused_naming_its_target_and_nothing_is_made_through_it(
    tmp_path: Path,
) -> None:
    path, target = tmp_path / "codeal.db", tmp_path / "volume" / "codeal.db"
    target.parent.mkdir()
    path.symlink_to(target)
    with pytest.raises(CodealStoreLost) as at_start:  # the log holds co-dealt hands: never "missing"
        check_record(path, lambda: (7, "fairdeck.db"))
    with pytest.raises(CodealStoreLost) as at_open:
        CodealStore(path, [OLD_KEY])
    for message in (str(at_start.value), str(at_open.value)):
        assert str(path) in message and str(target) in message and "\n" not in message, message
    assert not target.exists()


def test_a_fifo_named_codeal_db_is_said_not_a_regular_file_not_missing_or_empty(tmp_path: Path) -> None:
    path = tmp_path / "codeal.db"
    os.mkfifo(path)
    with pytest.raises(CodealStoreLost) as refused:
        CodealStore(path, [OLD_KEY])
    assert f"co-dealt hands {path} is not a regular file (a FIFO)" in str(refused.value)


def test_a_codeal_db_moved_without_its_wal_is_refused_not_made_anew(tmp_path: Path) -> None:
    path = tmp_path / "codeal.db"
    create_record(path, [OLD_KEY])
    Path(f"{path}-wal").write_bytes(b"")  # as a file moved away while its -wal stayed
    path.rename(tmp_path / "moved.db")
    with pytest.raises(CodealStoreLost) as refused:
        check_record(path, lambda: (None, "fairdeck.db"))  # even as a first start
    assert f"{path}-wal" in str(refused.value) and "-shm" in str(refused.value)
    with pytest.raises(CodealStoreLost):
        create_record(path, [OLD_KEY])
    assert not path.exists()


def test_an_older_files_log_check_parsed_every_row_at_its_upgrade(tmp_path: Path) -> None:
    """The look-up of an older file's latest logged hands sorted every row by created_ms and parsed
    each row's JSON (no index): 17 s per GB inside the start's write transaction. It walks from the
    newest row and stops at the 8th logged hand: rows older than those are never read (here: a
    damaged JSON that any read of it would fail on)."""
    from fairdeck_server.dealing.codeal_record import CHECKED, _check_logged_here
    from fairdeck_server.dealing.codeal_store import SCHEMA

    db = sqlite3.connect(tmp_path / "codeal.db")
    db.execute(SCHEMA)
    add = (
        "INSERT INTO codeal_hands (hand_id, tenant, deck, created_ms, sealed_secrets, public) "
        "VALUES (?, 't', 'standard', ?, x'', ?)"
    )
    db.executemany(add, [(f"old{i}", 10_000 - i, "{not json") for i in range(50)])  # older rows
    db.executemany(add, [(f"new{i}", i, f'{{"log": {{"open": {i}}}}}') for i in range(CHECKED + 2)])
    asked: list[int] = []

    class Seen(Exception):
        pass

    def logged_at(index: int) -> bytes | None:
        asked.append(index)
        raise Seen

    with pytest.raises(Seen):  # not sqlite3.OperationalError "malformed JSON": the old rows unread
        _check_logged_here(db, tmp_path / "codeal.db", logged_at)
    assert asked == [CHECKED + 1]  # the newest logged hand first
    db.close()
