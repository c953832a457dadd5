"""The identity of a co-dealt hands' file (dealing/codeal_record.py) on a real SQLite file: made once
with the file, kept on reopening, bound to the log's key (or one the log rotated from), refused
beside another log's key, and given once, knowingly, to a file of an older fairdeck."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from fairdeck_server.dealing.codeal_store import CodealStore, CodealStoreLost, create_record

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
