"""The dealer's files and what outside readers do to them: the database and its -wal and -shm are
0600 (they hold sealed seeds, tokens' digests and tenants' hands); a backup tool holding a read
snapshot while the dealer deals grows the WAL, which shrinks back once the reader is gone; and
``fairdeck audit --data`` on a live dealer holds no snapshot between its pages."""

from __future__ import annotations

import os
import sqlite3
import stat
import time

from fairdeck.client import DealerClient
from fairdeck_server.storage.sqlite.reader import read_log
from tests.support.faults import FaultRun, lines, wait_for

MIB = 1024 * 1024


def mode(path: os.PathLike[str]) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_database_and_its_wal_and_shm_are_0600(run: FaultRun) -> None:
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)
    db = run.data_dir / "fairdeck.db"
    for path in (db, run.data_dir / "fairdeck.db-wal", run.data_dir / "fairdeck.db-shm"):
        assert mode(path) == 0o600, f"{path.name} is {mode(path):04o}"
    dealer.terminate()
    os.chmod(db, 0o644)  # a database made by an older fairdeck
    dealer = run.start()
    assert mode(db) == 0o600 and lines(dealer, "fairdeck.db was mode 0644: now 0600")
    run.ledger.deal(dealer.target, 1)


def wal_size(run: FaultRun) -> int:
    try:
        return os.path.getsize(run.data_dir / "fairdeck.db-wal")
    except FileNotFoundError:
        return 0


def test_a_backup_holding_a_snapshot_grows_the_wal_which_shrinks_after(run: FaultRun) -> None:
    """An outside reader (a backup tool, an sqlite3 shell) holds a read transaction while the
    dealer deals: the WAL cannot restart and grows. Once the reader is gone it is cut back to the
    journal size limit (16 MiB) at the next restart of the WAL, not kept until the dealer stops."""
    dealer = run.start(lifetime=60)
    run.ledger.deal(dealer.target, 1)
    reader = sqlite3.connect(run.data_dir / "fairdeck.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM log_entries").fetchone()  # the snapshot is taken here
    began = time.monotonic()
    with DealerClient(dealer.target, timeout=60) as c:
        while wal_size(run) < 24 * MIB:
            assert time.monotonic() - began < 60, f"the WAL grew to {wal_size(run) / MIB:.1f} MiB only"
            for _ in c.deal_hands("standard", 2048, close=True):
                pass
    grown = wal_size(run)
    reader.execute("COMMIT")
    reader.close()
    with DealerClient(dealer.target, timeout=60) as c:

        def shrunk() -> bool:
            for _ in c.deal_hands("standard", 256, close=True):
                pass
            return wal_size(run) <= 16 * MIB

        wait_for(f"the WAL ({grown / MIB:.0f} MiB) to shrink", shrunk, timeout=30, every=0.2)
    run.ledger.deal(dealer.target, 1)


def test_audit_data_holds_no_snapshot_between_pages(run: FaultRun) -> None:
    """While an audit of the data dir reads on, the dealer's WAL can restart: the reader holds no
    read transaction between the pages it reads."""
    dealer = run.start(lifetime=60)
    run.ledger.deal(dealer.target, 3)
    _, _, entries = read_log(run.data_dir / "fairdeck.db")
    assert next(entries)  # the audit has begun, and is busy with its first page
    run.ledger.deal(dealer.target, 2)
    with sqlite3.connect(run.data_dir / "fairdeck.db", isolation_level=None) as other:
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0, "a reader's snapshot kept the WAL from restarting"
    assert sum(1 for _ in entries) >= 5
