"""The log refusing a co-dealt hand's entries (storage unavailable between the co-dealt store and the
log): no card is dealt from a hand before its opening is logged, and a close whose entries were
refused logs them once, on the next CloseHand, after a restart too; a hand opened before the
dealer logged co-dealt hands gets its whole record logged. In process, over a real co-dealer, real
SQLite files, and the log's real storage, closed under the dealer to refuse."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, decode_entry
from fairdeck.codeal.log_audit import CodealLogAudit
from fairdeck.wire import Reason
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import close, fill, log_of, make_dealer, pooled


async def refusing(dealer: CodealDealer) -> None:
    """The log's storage stops taking writes (every append fails STORAGE_UNAVAILABLE)."""
    await dealer.log.dealer.storage.close()


def test_a_close_whose_entries_the_log_refused_logs_them_once_on_the_next_close(tmp_path: Path) -> None:
    async def first() -> str:
        dealer = make_dealer(tmp_path)
        row = await dealer.make_hand("t", "short")
        await dealer.draw("t", row.hand_id, 2, b"")
        await refusing(dealer)
        with pytest.raises(DealerError) as e:
            await dealer.close("t", row.hand_id)
        assert e.value.reason == Reason.STORAGE_UNAVAILABLE
        dealer.store.close()
        return row.hand_id

    hand_id = asyncio.run(first())
    assert [e[4] for e in log_of(tmp_path)] == [SETUP, SHUFFLE, SHUFFLE]

    async def after_restart() -> None:
        dealer = make_dealer(tmp_path)
        closed = await dealer.close("t", hand_id)  # closed already, its entries not logged: now
        again = await dealer.close("t", hand_id)  # and never twice
        assert closed.closed_ms is not None and again.public["log"] == closed.public["log"]
        await close(dealer)

    asyncio.run(after_restart())
    entries = log_of(tmp_path)
    assert [e[4] for e in entries] == [SETUP, SHUFFLE, SHUFFLE, SHARES, SHARES, SEALS, SEEDS]
    assert audited(entries).verified == 1


def audited(entries: list[bytes]) -> CodealLogAudit:
    """The co-dealt checks of the audit over ``entries``, which must find nothing."""
    audit = CodealLogAudit()
    assert [found for i, e in enumerate(entries) for found in audit.add(i, e)[1]] == []
    assert audit.finish() == []
    return audit


def test_a_pooled_deck_whose_opening_the_log_refused_is_logged_before_its_first_card(
    tmp_path: Path,
) -> None:
    async def scenario() -> str:
        dealer = make_dealer(tmp_path)
        await fill(dealer, [("t", "short")], 1)
        (hand_id,) = pooled(tmp_path)
        await refusing(dealer)
        with pytest.raises(DealerError) as e:
            await dealer.open_hand("t", "short")  # the deck is taken, its entries refused
        assert e.value.reason == Reason.STORAGE_UNAVAILABLE
        dealer.store.close()
        dealer = make_dealer(tmp_path)  # a restart
        assert log_of(tmp_path) == []  # not in the log, and not in the pool again
        assert hand_id not in pooled(tmp_path)
        await dealer.draw("t", hand_id, 1, b"")  # its id was never answered; were it drawn from:
        assert [e[4] for e in log_of(tmp_path)] == [SETUP, SHUFFLE, SHUFFLE]
        await dealer.close("t", hand_id)
        await close(dealer)
        return hand_id

    hand_id = asyncio.run(scenario())
    entries = log_of(tmp_path)
    assert [(e[4], decode_entry(e).hand_id) for e in entries] == [
        (kind, hand_id) for kind in (SETUP, SHUFFLE, SHUFFLE, SHARES, SEALS, SEEDS)
    ]
    assert audited(entries).verified == 1


def test_a_hand_opened_before_codealt_logging_gets_its_whole_record_logged_at_its_close(
    tmp_path: Path,
) -> None:
    """A co-dealt hand a dealer of the version before opened and dealt from (its row notes no log
    step): closing it logs setup, shuffles, shares and seeds, in that order, in one append."""

    async def opened_before() -> str:
        dealer = make_dealer(tmp_path)
        row = await dealer.make_hand("t", "short")
        await dealer.draw("t", row.hand_id, 2, b"")
        await close(dealer)
        return row.hand_id

    hand_id = asyncio.run(opened_before())
    with sqlite3.connect(tmp_path / "codeal.db") as db:  # as the version before stored it
        db.execute("UPDATE codeal_hands SET public = json_remove(public, '$.log')")
    with sqlite3.connect(tmp_path / "fairdeck.db") as db:
        db.execute("DELETE FROM log_entries")
        db.execute("DELETE FROM log_hashes")

    async def close_it() -> None:
        dealer = make_dealer(tmp_path)
        await dealer.close("t", hand_id)
        await close(dealer)

    asyncio.run(close_it())
    entries = log_of(tmp_path)
    assert [e[4] for e in entries] == [SETUP, SHUFFLE, SHUFFLE, SHARES, SHARES, SEALS, SEEDS]
    assert audited(entries).verified == 1
