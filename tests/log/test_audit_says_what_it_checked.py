"""``fairdeck audit`` says exactly what it checked, and refuses a database it cannot read in one line.

Each test is named after a bug it pins:

- ``--since`` on a missing file claimed "consistent with the saved checkpoint";
- a fresh dealer (empty log, nothing signed yet) failed to audit;
- one flipped byte was reported once per later checkpoint, and blamed the
  reveal that followed instead of the entry that was changed;
- a corrupt database printed a raw ``sqlite3.DatabaseError`` traceback.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from fairdeck.client import DealerClient
from fairdeck.log import merkle
from fairdeck.log.note import Signer
from tests.support.dealers import RunningDealer
from tests.support.logs import (
    DB_NAME,
    BuiltLog,
    CliResult,
    audit_data,
    checkpoint_sizes,
    database,
    fairdeck,
    fairdeck_process,
    read_checkpoints,
    read_entries,
    sign_tree,
    signer_of,
    verifier_key,
)
from tests.support.waits import wait_for

EMPTY_TREE_ROOT = hashlib.sha256(b"").hexdigest()  # RFC 9162 2.1.1


def _tree(data_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(data_dir)) for p in data_dir.rglob("*"))


# -- --since on a missing file -------------------------------------------------------------------


def test_since_missing_file_does_not_claim_consistency(built_log: BuiltLog, tmp_path: Path) -> None:
    saved = tmp_path / "typo.note"
    key = verifier_key(built_log.data_dir)
    text = fairdeck("audit", "--data", str(built_log.data_dir), "--key", key, "--since", str(saved))
    assert text.rc == 0, text.out + text.err
    assert "consistent with the saved checkpoint" not in text.out.replace("NOT consistent", "")
    assert (
        f"  consistency NOT checked: no saved checkpoint at {saved} (a first audit)" in text.out.splitlines()
    )
    assert f"  new checkpoint saved to {saved}" in text.out.splitlines()
    assert saved.read_bytes() == read_checkpoints(built_log.data_dir)[-1][2]

    # The next audit does check it, and says so.
    again = audit_data(built_log.data_dir, "--since", str(saved))
    assert again.rc == 0
    assert again.report["consistency"] == (
        f"consistent with the saved checkpoint (tree size {built_log.entries}): the log only grew"
    )


def test_since_unreadable_file_is_a_usage_error(built_log: BuiltLog, tmp_path: Path) -> None:
    """A --since that exists but cannot be read (here a directory) is not a first audit."""
    result = audit_data(built_log.data_dir, "--since", str(tmp_path))
    assert (result.rc, result.out) == (2, "")
    assert result.err.startswith(f"fairdeck audit: cannot read --since {tmp_path}: ")
    assert len(result.err.splitlines()) == 1


# -- an empty log ----------------------------------------------------------------------------------


def test_fresh_dealer_audits_ok(tmp_path: Path) -> None:
    data = tmp_path / "data"
    saved = tmp_path / "first.note"
    with RunningDealer(data, checkpoint_interval=0.02) as dealer:
        key = verifier_key(data)
        for where in (["--target", dealer.target], ["--data", str(data)]):
            result = fairdeck("audit", *where, "--key", key, "--json")
            assert result.rc == 0, result.out + result.err
            report = result.report
            assert (report["ok"], report["entries"], report["tree_size"], report["findings"]) == (
                True,
                0,
                0,
                [],
            )
            assert report["root"] == EMPTY_TREE_ROOT == merkle.EMPTY_ROOT.hex()

        text = fairdeck("audit", "--target", dealer.target, "--key", key, "--since", str(saved))
        assert text.rc == 0, text.out + text.err
        assert text.out.splitlines()[1:] == [
            f"  the empty log: nothing to sign yet, root {EMPTY_TREE_ROOT} (the empty tree)",
            "  closed and verified 0, voided 0, still open within their lifetime 0",
            f"  consistency NOT checked: no saved checkpoint at {saved} (a first audit)",
            f"  no checkpoint to save to {saved} yet: the log is empty",
        ]
        assert not saved.exists()

        # Once the dealer has dealt, the log is no longer empty, and the audit checks it all.
        with DealerClient(dealer.target, timeout=20) as c:
            assert len(list(c.deal_hands("standard", 2, close=True))) == 2
        wait_for("a checkpoint covering the log", lambda: max(checkpoint_sizes(data), default=0) >= 4)
        after = fairdeck("audit", "--target", dealer.target, "--key", key, "--json", "--since", str(saved))
        assert after.rc == 0 and after.report["tree_size"] == 4 and after.report["closed"] == 2
        assert saved.exists()


def test_empty_log_after_a_saved_checkpoint_is_a_rollback(built_log: BuiltLog, tmp_path: Path) -> None:
    """An empty log is valid alone, not after a checkpoint of a larger tree was saved."""
    saved = tmp_path / "seen.note"
    saved.write_bytes(read_checkpoints(built_log.data_dir)[-1][2])
    # A new, empty log. The dealer no longer starts a new log beside an old key (the keys-and-data
    # identity refusals), so this is a fresh data dir; an empty log carries no signature, so which
    # key it has does not matter to what is checked here.
    data = tmp_path / "data"
    with RunningDealer(data) as dealer:
        result = fairdeck(
            "audit", "--target", dealer.target, "--key", verifier_key(built_log.data_dir), "--json",
            "--since", str(saved),
        )  # fmt: skip
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == [
        f"log truncated: a checkpoint signs {built_log.entries} entries, only 0 are present "
        "(the checkpoint saved by the earlier audit)"
    ]
    assert result.report["consistency"].startswith("NOT consistent with the saved checkpoint")


def test_entries_without_a_checkpoint_still_fail(log_copy: Path) -> None:
    """What makes an empty log pass is that it is empty, not that nothing is signed."""
    with database(log_copy) as conn:
        conn.execute("DELETE FROM checkpoints")
    result = audit_data(log_copy)
    assert result.rc == 1
    assert [f["problem"] for f in result.findings] == ["no signed checkpoint covers the log"]


# -- tampering, reported once ---------------------------------------------------------------------


def _sign_every_size(data_dir: Path, up_to: int) -> None:
    """Add the checkpoints an honest dealer signing after every entry would have made."""
    signer = signer_of(data_dir)
    entries = read_entries(data_dir)
    with database(data_dir) as conn:
        for size in range(1, up_to + 1):
            root = merkle.root([merkle.leaf_hash(e) for e in entries[:size]])
            conn.execute(
                "INSERT OR IGNORE INTO checkpoints (size, root, note, time_ms) VALUES (?, ?, ?, ?)",
                (size, root, sign_tree(signer, size, root), 0),
            )


def _flip(data_dir: Path, index: int, offset_from_end: int) -> None:
    with database(data_dir) as conn:
        entry = bytearray(conn.execute("SELECT entry FROM log_entries WHERE idx = ?", (index,)).fetchone()[0])
        entry[len(entry) - offset_from_end] ^= 0x01
        conn.execute("UPDATE log_entries SET entry = ? WHERE idx = ?", (bytes(entry), index))


def test_flipped_byte_in_entry_5_is_reported_once_at_entry_5(built_log: BuiltLog, log_copy: Path) -> None:
    """Entry 5 is one of the 30 commitments opened first; its reveal comes much later.
    One byte of its commitment flipped: one finding, at entry 5, not at its reveal."""
    _sign_every_size(log_copy, 40)
    _flip(log_copy, 5, 20)  # inside the commitment, the commit entry's last field

    result = audit_data(log_copy)
    assert result.rc == 1
    [finding] = result.findings
    assert (finding["index"], finding["last_index"], finding["hand_id"]) == (5, None, None)
    assert finding["problem"].startswith(
        "altered: not the entry that the signed checkpoint for tree size 6 signs "
        "(the checkpoint for tree size 5 matches); "
    )
    assert finding["problem"].endswith("later finding(s) follow from it and are not listed")

    text = fairdeck("audit", "--data", str(log_copy), "--key", verifier_key(log_copy))
    assert [line for line in text.out.splitlines() if line.startswith("  BAD ")] == [
        f"  BAD entry 5: {finding['problem']}"
    ]


def test_flipped_byte_between_sparse_checkpoints_names_the_range(built_log: BuiltLog, log_copy: Path) -> None:
    """With the dealer's own checkpoints only: one finding naming the entries between the
    last checkpoint that matches and the first that does not; the flipped entry is among them."""
    sizes = built_log.checkpoint_sizes
    index = (sizes[1] + sizes[2]) // 2
    good = max([s for s in sizes if s <= index], default=0)
    bad = min(s for s in sizes if s > index)
    _flip(log_copy, index, 1)  # the last byte: a reveal's deck digest, or a commit's commitment

    result = audit_data(log_copy)
    assert result.rc == 1
    [finding] = result.findings
    assert finding["index"] == good and good <= index
    assert finding["last_index"] == (None if bad - good == 1 else bad - 1) and index < bad
    assert f"the signed checkpoint for tree size {bad}" in finding["problem"]
    assert f"(the checkpoint for tree size {good} matches)" in finding["problem"]


# -- a missing or corrupt database: one line, exit 2, never a sqlite3 traceback -------------------


def _one_line_refusal(result: CliResult, path: Path) -> None:
    assert result.rc == 2, result.out + result.err
    assert result.out == ""
    assert len(result.err.splitlines()) == 1, result.err
    assert str(path) in result.err and "Traceback" not in result.err


def test_corrupt_database_is_one_line_not_a_traceback(built_log: BuiltLog, tmp_path: Path) -> None:
    copy = built_log.copy(tmp_path / "data")
    db = copy / DB_NAME
    db.write_bytes(os.urandom(8192))  # not a SQLite file at all
    result = fairdeck("audit", "--data", str(copy), "--key", verifier_key(copy))
    _one_line_refusal(result, db)
    assert result.err.startswith(f"fairdeck audit: cannot read the dealer database {db}: ")
    assert "restore it from a backup" in result.err


def test_corrupt_database_pages_are_one_line_in_the_real_process(built_log: BuiltLog, tmp_path: Path) -> None:
    """Damage further in the file (the header intact): the real console script, one line, exit 2."""
    copy = built_log.copy(tmp_path / "data")
    db = copy / DB_NAME
    with database(copy) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    raw[4096:] = b"\xa5" * (len(raw) - 4096)  # every page but the first
    db.write_bytes(bytes(raw))
    result = fairdeck_process("audit", "--data", str(copy), "--key", verifier_key(built_log.data_dir))
    _one_line_refusal(result, db)


def test_missing_database_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    key = Signer.generate("audit.test").verifier.to_string()  # a real key: the refusal is the database's
    empty = tmp_path / "empty"
    empty.mkdir()
    for where in (empty, tmp_path / "nowhere"):
        before = _tree(tmp_path)
        result = fairdeck("audit", "--data", str(where), "--key", key)
        _one_line_refusal(result, where / DB_NAME)
        assert "--data must name the data dir of `fairdeck serve`" in result.err
        assert _tree(tmp_path) == before, "the audit created something"


def test_damage_found_while_reading_the_entries_is_one_line(built_log: BuiltLog, tmp_path: Path) -> None:
    """The count and the checkpoints read fine; an entry's overflow chain is broken (one page
    pointer overwritten), so the damage shows only while the entries are streamed."""
    copy = built_log.copy(tmp_path / "data")
    db = copy / DB_NAME
    with database(copy) as conn:
        conn.execute("UPDATE log_entries SET entry = ? WHERE idx = 7", (b"\xee" * 20_000,))
    with database(copy) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    # The first overflow page: its 4-byte next-page pointer, then nothing but the entry's bytes.
    start = next(p for p in range(0, len(raw), page) if raw[p + 4 : p + page] == b"\xee" * (page - 4))
    raw[start : start + 4] = (len(raw) // page + 1000).to_bytes(4, "big")  # a page past the end
    db.write_bytes(bytes(raw))

    result = fairdeck("audit", "--data", str(copy), "--key", verifier_key(built_log.data_dir))
    _one_line_refusal(result, db)
    assert result.err.startswith(f"fairdeck audit: cannot read the dealer database {db}: ")
