"""The log refusing a co-dealt hand's entries (storage unavailable between the co-dealt store and the
log): no card is dealt from a hand whose opening is not logged, and a close whose entries were
refused logs them once, on the next CloseHand, after a restart too. In process, over a real
co-dealer, real SQLite files, and the log's real storage, closed under the dealer to refuse."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from fairdeck.codeal.entries import SEEDS, SETUP, SHARES, SHUFFLE, decode_entry
from fairdeck.codeal.log_audit import CodealLogAudit
from fairdeck.wire import Reason
from fairdeck_server.codeal_dealing import CodealDealer
from fairdeck_server.refusals import DealerError
from tests.codealer.test_pool import close, fill, make_dealer, pooled


def log_of(tmp_path: Path) -> list[bytes]:
    with sqlite3.connect(tmp_path / "fairdeck.db") as db:
        return [bytes(e) for (e,) in db.execute("SELECT entry FROM log_entries ORDER BY idx")]


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
    assert [e[4] for e in entries] == [SETUP, SHUFFLE, SHUFFLE, SHARES, SHARES, SEEDS]
    audit = CodealLogAudit()
    assert [found for i, e in enumerate(entries) for found in audit.add(i, e)[1]] == []
    assert (audit.verified, audit.finish()) == (1, [])


def test_a_pooled_deck_whose_opening_the_log_refused_is_never_dealt(tmp_path: Path) -> None:
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
        with pytest.raises(DealerError) as e:
            await dealer.draw("t", hand_id, 1, b"")
        assert e.value.reason == Reason.HAND_NOT_FOUND
        await close(dealer)
        return hand_id

    hand_id = asyncio.run(scenario())
    assert [decode_entry(e).hand_id for e in log_of(tmp_path)] == []  # not in the log: never a hand
    assert hand_id not in pooled(tmp_path)  # and not in the pool again
