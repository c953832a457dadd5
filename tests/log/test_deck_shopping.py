"""Deck shopping in a real log: hands committed and never revealed within the maximum hand
lifetime are named by ``fairdeck audit``, and a dealer voids (reveals and logs) its stale
hands, stopped and restarted or left running, so that the audit then passes."""

from __future__ import annotations

from pathlib import Path

from fairdeck.client import DealerClient
from fairdeck.client.models import HandState
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.log.logentry import VOIDED, CommitEntry, RevealEntry, decode
from tests.support.dealers import RunningDealer
from tests.support.logs import (
    LONG_LIFETIME,
    BuiltLog,
    audit_data,
    database,
    finding_text,
    read_entries,
    resign_all,
)
from tests.support.tampering import Layout
from tests.support.waits import outlast, wait_for

# -- deck shopping ---------------------------------------------------------------------------------------


def test_open_hands_past_the_audit_lifetime_are_named(built_log: BuiltLog, layout: Layout) -> None:
    """The same log, audited with a lifetime shorter than the hands' age: every unrevealed
    commitment that the log holds a later entry for, more than the lifetime after it, is named,
    and only those; the others are pending (docs/log-format.md, "Overdue hands")."""
    lenient = audit_data(built_log.data_dir, "--max-hand-lifetime", LONG_LIFETIME)
    assert lenient.rc == 0
    assert lenient.report["open_within_lifetime"] == len(built_log.still_open)

    strict = audit_data(built_log.data_dir, "--max-hand-lifetime", "0.005")
    times = [decode(e).time_ms for e in layout.entries]
    overdue = {
        h
        for h in built_log.still_open
        if max(times[layout.commits[h] + 1 :], default=0) - times[layout.commits[h]] > 5
    }
    assert overdue, "the log holds entries dealt after its open hands"
    assert strict.rc == 1
    assert strict.report["open_within_lifetime"] == len(built_log.still_open) - len(overdue)
    assert {(f["hand_id"], f["index"]) for f in strict.findings} == {(h, layout.commits[h]) for h in overdue}
    assert all("never revealed within the maximum hand lifetime" in f["problem"] for f in strict.findings)


def test_stopped_dealer_leaves_unrevealed_commitments_then_voids_them(tmp_path: Path) -> None:
    """A dealer stopped before it can void its stale hands: downtime longer than the lifetime is
    not deck shopping (the log holds nothing after them: they are pending); started again with a
    short lifetime, it voids them, and the audit then passes and counts them as voided."""
    data = tmp_path / "data"
    with RunningDealer(data, max_hand_lifetime=3600) as dealer, DealerClient(dealer.target, timeout=20) as c:
        opened = {c.open_hand("standard").hand_id for _ in range(3)}
        opened |= {c.deal_new_hand("short").hand.hand_id for _ in range(2)}
        drawn = c.open_hand("jokers")
        c.draw(drawn.hand_id, 3)
        opened.add(drawn.hand_id)
        closed = c.open_hand("standard")
        c.close_hand(closed.hand_id)
    commits = {decode(e).hand_id: i for i, e in enumerate(read_entries(data)) if decode(e).hand_id in opened}

    outlast(0.6)  # past the lifetime on this machine's clock
    pending = audit_data(data, "--max-hand-lifetime", "0.5")
    assert pending.rc == 0, finding_text(pending)
    assert pending.report["open_within_lifetime"] == len(opened)
    assert commits and pending.report["last_entry_index"] == len(read_entries(data)) - 1

    with RunningDealer(data, max_hand_lifetime=0.5) as dealer, DealerClient(dealer.target, timeout=20) as c:
        wait_for(
            "the dealer to void its stale hands",
            lambda: all(c.get(h).state is HandState.CLOSED for h in opened),
            timeout=10,
        )
        for h in opened:
            c.get(h).verify()  # a voided hand is revealed like any other

    result = audit_data(data, "--max-hand-lifetime", "0.5")
    assert result.rc == 0, finding_text(result)
    assert result.report["voided"] == len(opened)
    assert result.report["closed"] == 1
    logged = [decode(e) for e in read_entries(data)]
    assert {e.hand_id for e in logged if isinstance(e, RevealEntry) and e.outcome == VOIDED} == opened


def test_running_dealer_voids_in_time(tmp_path: Path) -> None:
    """A dealer with a 1 s lifetime that keeps running: its stale hands are voided
    and logged, so an audit with the same lifetime passes."""
    data = tmp_path / "data"
    with RunningDealer(data, max_hand_lifetime=1.0) as dealer, DealerClient(dealer.target, timeout=20) as c:
        opened = [c.open_hand("standard").hand_id for _ in range(4)] + [c.deal_new_hand().hand.hand_id]
        wait_for(
            "the dealer to void its stale hands",
            lambda: all(c.get(h).state is HandState.CLOSED for h in opened),
            timeout=15,
            every=0.1,
        )
    result = audit_data(data, "--max-hand-lifetime", "1")
    assert result.rc == 0, finding_text(result)
    assert result.report["voided"] == len(opened)
    assert result.report["open_within_lifetime"] == 0
    # The same log with the voids cut off (and re-signed with the real key) is pending: nothing
    # follows the open hands. With a hand dealt 2 s later in their place, it is deck shopping.
    entries = read_entries(data)
    with database(data) as conn:
        conn.execute("DELETE FROM log_entries WHERE idx >= ?", (len(opened),))
    resign_all(data)
    assert len(read_entries(data)) == len(opened) < len(entries)
    assert audit_data(data, "--max-hand-lifetime", "1").rc == 0
    later = CommitEntry(
        decode(entries[len(opened) - 1]).time_ms + 2000, "later", CURRENT_VERSION, "standard", bytes(32)
    )
    with database(data) as conn:
        conn.execute("INSERT INTO log_entries (idx, entry) VALUES (?, ?)", (len(opened), later.encode()))
    resign_all(data)
    shopping = audit_data(data, "--max-hand-lifetime", "1")
    assert shopping.rc == 1
    assert {f["hand_id"] for f in shopping.findings} == set(opened)
