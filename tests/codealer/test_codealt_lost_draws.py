"""A co-dealt draw whose answer the dealer never recorded: the co-dealer recorded and sealed the
positions (its ledger is the guard, written first), then the dealer's own write failed (a locked
or full codeal.db) or its call was cancelled. The dealer's record then lagged the co-dealer's and
the hand could never close: CloseHand (and the lifetime reaper's void) refused INTERNAL
CODEALER_INVALID forever, since the co-dealer's seal statements named positions the dealer did not
know. The close now records those positions from the co-dealer's signed statements. Real
``fairdeck codealer`` and ``fairdeck serve`` processes, real SQLite files."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.codeal_seat import CodealHands, SeatKey, verify_codeal_hand
from fairdeck.client.exceptions import FailedPrecondition, FairdeckError
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.waits import wait_for


@pytest.fixture
def table(tmp_path: Path, serve_forker: ServeForker) -> Iterator[tuple[CodealerProcess, DealerProcess]]:
    init_codealer(tmp_path / "cd1")
    codealer = CodealerProcess(tmp_path / "cd1", "127.0.0.1:0", "--reveal-hold", "1", forker=serve_forker)
    try:
        flags = codealer.dealer_flags()
        with DealerProcess(tmp_path / "data", tmp_path / "dealer.log", *flags, forker=serve_forker) as dealer:
            yield codealer, dealer
    finally:
        codealer.stop()


def lose_a_draw(hands: CodealHands, codeal_db: Path, hand_id: str, seat: SeatKey) -> FairdeckError:
    """Positions 1 and 2 drawn to ``seat`` while the dealer's codeal.db takes no write: the
    co-dealer records and seals them, the dealer cannot record them. The refusal."""
    blocker = sqlite3.connect(codeal_db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(FairdeckError) as refused:
            hands.draw(hand_id, 2, seat_public_key=seat.public_key)
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()
    return refused.value


@pytest.mark.light
def test_a_codealt_draw_whose_codeal_db_write_failed_was_internal_with_a_traceback(
    tmp_path: Path, table: tuple[CodealerProcess, DealerProcess]
) -> None:
    _, dealer = table
    with DealerClient(dealer.target, timeout=60) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("standard")
        hands.draw(hand.hand_id, 1)
        refused = lose_a_draw(hands, tmp_path / "data" / "codeal.db", hand.hand_id, SeatKey.generate())
    assert (refused.code.name, refused.reason) == ("UNAVAILABLE", "STORAGE_UNAVAILABLE")
    assert "Traceback" not in dealer.stderr()


@pytest.mark.light
def test_a_draw_the_codealer_sealed_but_the_dealer_failed_to_record_wedged_the_hands_close(
    tmp_path: Path, table: tuple[CodealerProcess, DealerProcess]
) -> None:
    codealer, dealer = table
    alice = SeatKey.generate()
    with DealerClient(dealer.target, timeout=60) as client:
        hands = CodealHands(client)
        hand = hands.open_hand("standard")
        board = hands.draw(hand.hand_id, 1)  # position 0, public
        lose_a_draw(hands, tmp_path / "data" / "codeal.db", hand.hand_id, alice)  # positions 1 and 2
        # The seat never got positions 1 and 2 (the answer was lost), so it cannot release them
        # (spec 9.3): the hand closes once the co-dealer's hold (1 s here) has passed.
        done: list[pb.Hand] = []

        def closes() -> bool:
            try:
                done.append(hands.close_hand(hand.hand_id))
            except FailedPrecondition as e:
                if e.reason != "SEATS_NOT_RELEASED":
                    raise
                return False
            return True

        wait_for("the close once the hold passed", closes, timeout=60)
        closed = done[0]
    assert closed.state == pb.HAND_STATE_CLOSED
    dealt = [(d.position, d.seat_public_key) for d in closed.codeal.dealt]
    assert dealt == [(0, b""), (1, alice.public_key), (2, alice.public_key)]
    assert closed.codeal.dealt[0].card == board.cards[0].id
    verify_codeal_hand(closed, [bytes.fromhex(codealer.identity)])
    assert "recorded now from the co-dealer's signed seal statements" in dealer.stderr()
