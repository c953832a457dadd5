"""The hold's clock (docs/codealing-spec.md 9.3, 13.4): a seat's cards are protected for the whole
hold from when they were sealed. The hold once counted from the hand's first share of any kind, so
a dealer could age a hand before dealing its seats (a public share, or a card sealed to a key of
its own, then a wait) and reveal the seed the moment the seats' cards were sealed. In process, on
real SQLite files and the real co-dealer and dealer, on an injected clock."""

from __future__ import annotations

import sqlite3

import pytest

from fairdeck.client.codeal_seat import SeatKey
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.refusals import DealerError
from tests.support.held_hands import HeldTable, refused_reveal


@pytest.mark.parametrize("aged_by", ["public", "own_key"])
def test_a_hand_aged_before_its_seats_are_dealt_does_not_skip_their_hold(
    held_table: HeldTable, aged_by: str
) -> None:
    """The attack: the dealer takes position 0 (a public share, or sealed to a key it holds), waits
    the hold, then deals the seat and calls RevealSeed at once, without the seat's release. It got
    the seed (both permutations: the seat's cards) the moment they were dealt; now refused until a
    hold has passed since the seat's cards were sealed."""
    t, codealer = held_table, held_table.codealer
    mine, alice = SeatKey.generate(), SeatKey.generate()

    async def scene() -> None:
        hand_id = await t.open_hand()
        await t.draw(hand_id, 1, None if aged_by == "public" else mine)
        t.now[0] += t.hold_ms
        await t.draw(hand_id, 2, alice)
        refused_reveal(codealer, hand_id)
        with pytest.raises(DealerError):  # nor the seat's card made public
            codealer.share(hand_id, 1, b"", [], 1)
        t.now[0] += t.hold_ms - 1
        refused_reveal(codealer, hand_id, [])
        t.now[0] += 1
        assert codealer.reveal(hand_id) == codealer._secrets(codealer._row(hand_id))[1]

    t.play(scene)


def test_a_seat_dealt_late_in_the_hand_gets_the_whole_hold(held_table: HeldTable) -> None:
    """Honest play, a draw game: one seat dealt at the start, another's card near the hold's end.
    The late seat's card was open to a release-less RevealSeed a second after it was sealed."""
    t = held_table
    alice, bob = SeatKey.generate(), SeatKey.generate()

    async def scene() -> None:
        hand_id = await t.open_hand()
        await t.draw(hand_id, 2, alice)
        t.now[0] += t.hold_ms - 1000
        await t.draw(hand_id, 1, bob)
        t.now[0] += 1000
        refused_reveal(t.codealer, hand_id)
        t.now[0] += t.hold_ms - 1000
        t.codealer.reveal(hand_id)

    t.play(scene)


def test_a_hand_ended_by_restored_answers_no_seed_before_the_hold_even_with_releases(
    held_table: HeldTable,
) -> None:
    """A ledger restored from a backup taken before a hand's seats were dealt remembers none of its
    seals: its seed was answered at once, with no release (no seat it knows of) and no hold (no
    share it knows of), so the dealer read the cards dealt after the backup. Now a hand
    ``codealer restored`` ended answers its seed only the hold after the restore, whatever
    releases come: the seats it forgot cannot release it."""
    t = held_table
    alice = SeatKey.generate()
    backup = t.directory / "backup.db"

    async def deal() -> tuple[str, list[bytes]]:
        hand_id = await t.open_hand()
        with sqlite3.connect(t.directory / "codealer.db") as live, sqlite3.connect(backup) as copy:
            live.backup(copy)  # the operator's backup: announced and shuffled, nothing dealt
        drawn = await t.draw(hand_id, 2, alice)
        return hand_id, t.releases(hand_id, drawn, alice)

    hand_id, tokens = t.play(deal)
    t.codealer.ledger.close()
    backup.replace(t.directory / "codealer.db")  # the disk lost; the backup put back
    ledger = Ledger(t.directory / "codealer.db", create=False)
    assert ledger.end_open_hands(t.now[0]) >= 1  # what ``codealer restored`` does
    restored = t.reopened(ledger)
    refused_reveal(restored, hand_id)
    refused_reveal(restored, hand_id, tokens)
    t.now[0] += t.hold_ms - 1
    refused_reveal(restored, hand_id, tokens)
    t.now[0] += 1
    assert restored.reveal(hand_id) == restored._secrets(restored._row(hand_id))[1]
    assert restored.reveal(hand_id)  # a retry, answered again
    ledger.close()
