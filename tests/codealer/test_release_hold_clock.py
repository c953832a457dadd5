"""The hold's clock (docs/codealing-spec.md 9.3, 13.4): a seat's cards are protected for the whole
hold from when they were sealed. The hold once counted from the hand's first share of any kind, so
a dealer could age a hand before dealing its seats (a public share, or a card sealed to a key of
its own, then a wait) and reveal the seed the moment the seats' cards were sealed. In process, on
real SQLite files and the real co-dealer and dealer, on an injected clock."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.wire import Reason
from fairdeck_server.codealer.holder import CoDealer
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import in_process, seat_tokens

T0 = 1_700_000_000_000
HOLD_MS = 60_000
DECK = "short"


def refused_reveal(codealer: CoDealer, hand_id: str, tokens: list[bytes] | None = None) -> None:
    with pytest.raises(DealerError) as e:
        codealer.reveal(hand_id, tokens or [])
    assert (e.value.reason, e.value.field) == (Reason.SEATS_NOT_RELEASED, "seat_releases")


@pytest.mark.parametrize("aged_by", ["public", "own_key"])
def test_a_hand_aged_before_its_seats_are_dealt_does_not_skip_their_hold(
    tmp_path: Path, aged_by: str
) -> None:
    """The attack: the dealer takes position 0 (a public share, or sealed to a key it holds), waits
    the hold, then deals the seat and calls RevealSeed at once, without the seat's release. It got
    the seed (both permutations: the seat's cards) the moment they were dealt; now refused until a
    hold has passed since the seat's cards were sealed."""
    now = [T0]
    codealer, dealer, storage = in_process(tmp_path, now, reveal_hold_ms=HOLD_MS)
    mine, alice = SeatKey.generate(), SeatKey.generate()

    async def scene() -> None:
        await storage.start()
        hand_id = (await dealer.open_hand("t1", DECK)).hand_id
        await dealer.draw("t1", hand_id, 1, b"" if aged_by == "public" else mine.public_key)
        now[0] += HOLD_MS
        await dealer.draw("t1", hand_id, 2, alice.public_key)
        refused_reveal(codealer, hand_id)
        with pytest.raises(DealerError):  # nor the seat's card made public
            codealer.share(hand_id, 1, b"", [], 1)
        now[0] += HOLD_MS - 1
        refused_reveal(codealer, hand_id)
        now[0] += 1
        assert codealer.reveal(hand_id) == codealer._secrets(codealer._row(hand_id))[1]
        await dealer.aclose()
        await storage.close()

    asyncio.run(scene())


def test_a_seat_dealt_late_in_the_hand_gets_the_whole_hold(tmp_path: Path) -> None:
    """Honest play, a draw game: one seat dealt at the start, another's card near the hold's end.
    The late seat's card was open to a release-less RevealSeed a second after it was sealed."""
    now = [T0]
    codealer, dealer, storage = in_process(tmp_path, now, reveal_hold_ms=HOLD_MS)
    alice, bob = SeatKey.generate(), SeatKey.generate()

    async def scene() -> None:
        await storage.start()
        hand_id = (await dealer.open_hand("t1", DECK)).hand_id
        await dealer.draw("t1", hand_id, 2, alice.public_key)
        now[0] += HOLD_MS - 1000
        await dealer.draw("t1", hand_id, 1, bob.public_key)
        now[0] += 1000
        refused_reveal(codealer, hand_id)
        now[0] += HOLD_MS - 1000
        codealer.reveal(hand_id)
        await dealer.aclose()
        await storage.close()

    asyncio.run(scene())


def test_a_hand_ended_by_restored_answers_no_seed_before_the_hold_even_with_releases(
    tmp_path: Path,
) -> None:
    """A ledger restored from a backup taken before a hand's seats were dealt remembers none of its
    seals: its seed was answered at once, with no release (no seat it knows of) and no hold (no
    share it knows of), so the dealer read the cards dealt after the backup. Now a hand
    ``codealer restored`` ended answers its seed only the hold after the restore, whatever
    releases come: the seats it forgot cannot release it."""
    now = [T0]
    codealer, dealer, storage = in_process(tmp_path, now, reveal_hold_ms=HOLD_MS)
    alice = SeatKey.generate()
    backup = tmp_path / "backup.db"

    async def deal() -> tuple[str, list[bytes]]:
        await storage.start()
        hand_id = (await dealer.open_hand("t1", DECK)).hand_id
        with sqlite3.connect(tmp_path / "codealer.db") as live, sqlite3.connect(backup) as copy:
            live.backup(copy)  # the operator's backup: announced and shuffled, nothing dealt
        drawn = await dealer.draw("t1", hand_id, 2, alice.public_key)
        tokens = seat_tokens(hand_id, DECK, drawn, alice)
        await dealer.aclose()
        await storage.close()
        return hand_id, tokens

    hand_id, tokens = asyncio.run(deal())
    codealer.ledger.close()
    backup.replace(tmp_path / "codealer.db")  # the disk lost; the backup put back
    ledger = Ledger(tmp_path / "codealer.db", create=False)
    assert ledger.end_open_hands(now[0]) >= 1  # what ``codealer restored`` does
    restored = CoDealer(
        ledger, codealer.identity, codealer.vault, clock_ms=lambda: now[0], reveal_hold_ms=HOLD_MS
    )
    refused_reveal(restored, hand_id)
    refused_reveal(restored, hand_id, tokens)
    now[0] += HOLD_MS - 1
    refused_reveal(restored, hand_id, tokens)
    now[0] += 1
    assert restored.reveal(hand_id) == restored._secrets(restored._row(hand_id))[1]
    assert restored.reveal(hand_id)  # a retry, answered again
    ledger.close()
