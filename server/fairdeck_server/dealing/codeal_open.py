"""How a dealer opens its co-dealt hands' file, DATA_DIR/codeal.db, beside its log: one way for
``serve --codealer`` and ``fairdeck init --codeal-record --take-over`` alike.

``open_codeal_store`` refuses a missing file whose log holds co-dealt entries (``check_record``: it
was lost) and opens the file bound to the log's keys; a file of an older fairdeck (no record id
yet) has its latest hands looked up in that log before it is given an id (codeal_record.py): a hand
not at its logged index means another log's file, or a log older than the file, refused
(``CodealStoreLost``, one line naming the file and the fix). The log is read on its engine:
PostgreSQL given ``db``, else DATA_DIR/fairdeck.db.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fairdeck_server.dealing.codeal_record import RecordForeign
from fairdeck_server.dealing.codeal_store import CodealStore, CodealStoreError, check_record
from fairdeck_server.refusals import StartupRefused


def open_codeal_store(
    data_dir: Path, db: str | None, log_keys: Sequence[str], *, missing: str | None = None
) -> CodealStore:
    """DATA_DIR/codeal.db checked against the log and opened (made if missing and the log holds no
    co-dealt entry), or ``CodealStoreError``/``StartupRefused``. ``missing``: why a missing file is
    refused instead (a take-over claims the record of a file that is there)."""
    path = data_dir / "codeal.db"
    check_record(path, lambda: first_codeal_entry(data_dir, db))
    if missing is not None and not path.is_file():
        raise CodealStoreError(f"co-dealt hands {path} is missing: {missing}")
    return CodealStore(path, log_keys, lambda index: log_entry_at(data_dir, db, index))


def first_codeal_entry(data_dir: Path, db: str | None) -> tuple[int | None, str]:
    """The log's first co-dealt entry (or None), and how to name the log's database."""
    from fairdeck.log.audit import LogUnreadable

    try:
        if db is not None:
            from fairdeck_server.storage.postgres import first_codeal_entry as postgres_entry
            from fairdeck_server.storage.postgres.diagnosis import describe

            return postgres_entry(db), f"the PostgreSQL database {describe(db)}"
        from fairdeck_server.storage.sqlite import first_codeal_entry as sqlite_entry

        path = data_dir / "fairdeck.db"
        return sqlite_entry(path), f"database {path}"
    except LogUnreadable as e:
        raise StartupRefused(f"{e}: check it before the co-dealt hands' record is made") from None


def log_entry_at(data_dir: Path, db: str | None, index: int) -> bytes | None:
    """The log's entry at ``index`` (None: none), for an older codeal.db's hands (codeal_record.py)."""
    from fairdeck.log.audit import LogUnreadable

    try:
        if db is not None:
            from fairdeck_server.storage.postgres import log_entry_at as postgres_entry

            return postgres_entry(db, index)
        from fairdeck_server.storage.sqlite import log_entry_at as sqlite_entry

        return sqlite_entry(data_dir / "fairdeck.db", index)
    except LogUnreadable as e:
        raise RecordForeign(f"{e}: check it before the older co-dealt hands' file is upgraded") from None
