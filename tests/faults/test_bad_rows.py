"""Rows that ``PRAGMA quick_check`` passes and the dealer cannot read (a bad sector, a bad restore, a
migration's bug): an unknown deck, a garbage ``client_seeds`` blob whose count says 4 billion. One
bad row never stops the others: every other tenant's stale hands are voided, calls answer at once,
health stays SERVING, SIGTERM stops the dealer in time; the bad row is skipped, counted, logged
once without its content, and the audit names it (the dealer cannot reveal it)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError
from fairdeck.client.models import HandState
from tests.support.faults import FaultRun, lines, metric, wait_for
from tests.support.waits import outlast

DAMAGE = {
    "deck": ("UPDATE hands SET deck = 'no-such-deck' WHERE hand_id = ?", ()),
    "client_seeds": ("UPDATE hands SET client_seeds = ? WHERE hand_id = ?", (b"\xff\xff\xff\xff\x00\x00",)),
}


def damage(run: FaultRun, column: str, hand_id: str) -> None:
    sql, values = DAMAGE[column]
    with sqlite3.connect(run.data_dir / "fairdeck.db") as db:
        db.execute(sql, (*values, hand_id))
        assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("column", sorted(DAMAGE))
def test_one_bad_row_never_stops_the_others(run: FaultRun, column: str) -> None:
    dealer = run.start(lifetime=60)
    hands = run.ledger.open(dealer.target, 4)
    opened = time.monotonic()
    dealer.terminate()
    bad, others = hands[0], hands[1:]
    damage(run, column, bad)
    run.damaged = {bad}

    dealer = run.start("--metrics-listen", "127.0.0.1:0", lifetime=2)
    with DealerClient(dealer.target, timeout=5, retries=0) as c:
        wait_for("the other hands voided", lambda: all(c.get(h).state is HandState.CLOSED for h in others))
        began = time.monotonic()
        with pytest.raises(FairdeckError) as unreadable:
            c.get(bad)
        assert time.monotonic() - began < 3 and unreadable.value.reason == "HAND_UNREADABLE"
        assert column in str(unreadable.value)
    outlast(max(0.0, 2.5 - (time.monotonic() - opened)))  # the bad hand's lifetime (2 s) is past
    run.ledger.deal(dealer.target, 2)  # dealing goes on, past the bad hand's lifetime
    assert metric(dealer, "fairdeck_reaper_skipped_hands_total", reason="HAND_UNREADABLE") == 1
    assert metric(dealer, "fairdeck_unreadable_rows_total", operation="update_hand") >= 1
    said = lines(dealer, f"stored hand {bad} cannot be read")
    assert len(said) == 1 and f"column {column} is damaged" in said[0]
    assert len(lines(dealer, f"stale hand {bad} of tenant default cannot be voided (HAND_UNREADABLE)")) == 1
    began = time.monotonic()
    assert dealer.terminate(timeout=30) == 0
    assert time.monotonic() - began < 15, "SIGTERM did not stop the dealer in time"
