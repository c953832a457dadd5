"""The early reveal (docs/codealing-spec.md 9.3, 13.4): the co-dealer answers its seed, which with
the dealer's gives every hole card dealt, only with a release of every seat it sealed a share to, or
once its hold has passed since the hand's first share. Before, the dealer (or anyone holding its
token) could call RevealSeed mid-hand and read every seat's cards. In process, on real SQLite
files and the real co-dealer, dealer and reaper, on an injected clock."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from fairdeck.client.codeal_seat import SeatKey
from fairdeck.v1 import codealer_pb2
from fairdeck.wire import Reason
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_voids import CodealReaper
from fairdeck_server.refusals import DealerError
from tests.support.codeal_pool import InProcessLink
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.dealers import DealerProcess
from tests.support.fixtures import HeldFactory
from tests.support.forked_serve import ServeForker
from tests.support.held_hands import TENANT, HeldTable, not_released, refused_close, refused_reveal
from tests.support.waits import wait_for


def test_early_reveal_mid_hand_is_refused_and_the_hand_deals_on(held_table: HeldTable) -> None:
    """The attack: hole cards sealed to two seats, then RevealSeed (the co-dealer's, as the
    dealer's token holder calls it, and the dealer's own CloseHand) a millisecond before the hold
    and without releases: refused, no seed, nothing recorded as ended, and the co-dealer still
    deals the next positions, public and sealed. No public share of a seat's card either."""
    t, codealer = held_table, held_table.codealer
    alice, bob = SeatKey.generate(), SeatKey.generate()

    async def scene() -> None:
        hand_id = await t.open_hand()
        await t.draw(hand_id, 2, alice)
        await t.draw(hand_id, 2, bob)
        t.now[0] += t.hold_ms - 1
        error = refused_reveal(codealer, hand_id)
        assert "2 of the 2 seats" in str(error)
        await refused_close(t.dealer, hand_id)
        row = codealer.ledger.hand(hand_id)
        assert row is not None and not row.revealed and not row.released
        with pytest.raises(DealerError) as e:  # a seat's card made public: the same secret
            codealer.share(hand_id, 0, b"", [], 1)
        assert e.value.reason == Reason.SHARE_GIVEN_TO_ANOTHER_SEAT
        board = await t.draw(hand_id, 3)  # the hand goes on
        assert len(board.cards) == 3
        assert len((await t.draw(hand_id, 1, alice)).shares) == 1

    t.play(scene)


def test_every_seats_release_reveals_and_a_missing_forged_or_other_hands_one_does_not(
    held_table: HeldTable,
) -> None:
    t, codealer = held_table, held_table.codealer
    alice, bob = SeatKey.generate(), SeatKey.generate()

    async def scene() -> None:
        hand_id = await t.open_hand()
        to_alice = t.releases(hand_id, await t.draw(hand_id, 2, alice), alice)
        to_bob = t.releases(hand_id, await t.draw(hand_id, 2, bob), bob)
        await t.draw(hand_id, 1)  # a community card needs no release
        other_id = await t.open_hand()
        in_other = t.releases(other_id, await t.draw(other_id, 2, alice), alice)
        refused_reveal(codealer, hand_id, to_alice)  # bob's missing
        refused_reveal(codealer, hand_id, [os.urandom(32), os.urandom(32)])  # forged
        refused_reveal(codealer, hand_id, [*in_other, *to_bob])  # alice's of another hand
        await refused_close(t.dealer, hand_id, to_bob)
        with pytest.raises(DealerError) as e:
            await t.dealer.close(TENANT, hand_id, releases=[b"short"])
        assert (e.value.reason, e.value.field) == (Reason.MALFORMED_REQUEST, "seat_releases")
        # One token per seat key is enough; the dealer passes them on; the hand closes and verifies.
        closed = await t.dealer.close(TENANT, hand_id, releases=[to_alice[1], *in_other, to_bob[0]])
        assert closed.closed_ms is not None and len(closed.public["seeds"]) == 2
        assert [d["position"] for d in closed.public["dealt"]] == [0, 1, 2, 3, 4]
        row = codealer.ledger.hand(hand_id)
        assert row is not None and row.revealed and row.released
        refused_reveal(codealer, other_id, to_alice)  # the other hand is untouched

    t.play(scene)


class CountingLink(InProcessLink):
    def __init__(self, inner: InProcessLink) -> None:
        super().__init__(inner.codealer)
        self.reveals = 0

    async def reveal(
        self, hand_id: str, releases: object = ()
    ) -> tuple[bytes, list[tuple[int, bytes, bytes, bytes]]]:
        self.reveals += 1
        return await super().reveal(hand_id, releases)  # type: ignore[arg-type]


def test_past_the_hold_an_abandoned_hand_is_voided_and_a_refused_void_is_paced(
    held_table_factory: HeldFactory,
) -> None:
    """The dealer's void sends no releases: while the co-dealer's hold has not passed it is refused,
    held back ``held_s`` (never retried in a tight loop, never skipped for good), then voided and
    closed with both seeds once the hold passes."""
    t = held_table_factory(reveal_hold_ms=10_000)
    lifetime_s = 4
    link = CountingLink(t.dealer.link)  # type: ignore[arg-type]
    t.dealer.link = link
    reaper = CodealReaper(t.dealer, lifetime_s, lambda: t.now[0], held_s=3.0)
    seat = SeatKey.generate()

    async def scene() -> None:
        hand_id = await t.open_hand()
        await t.draw(hand_id, 2, seat)
        t.now[0] += lifetime_s * 1000  # past the dealer's void time, before the hold
        await reaper.round()
        assert link.reveals == 1 and hand_id in reaper.held and hand_id not in reaper.skipped
        for _ in range(5):  # passes in a row do not ask again, nor count it (a full pass: no wait)
            assert await reaper.round() == 0
        assert link.reveals == 1
        t.now[0] += 3000  # held_s later: asked again, still held (7 s of the 10 s hold)
        await reaper.round()
        assert link.reveals == 2 and (await t.dealer.get(TENANT, hand_id)).closed_ms is None
        t.now[0] += 3000  # the hold has passed
        await reaper.round()
        row = await t.dealer.get(TENANT, hand_id)
        assert row.closed_ms is not None and row.public.get("voided") is True
        assert len(row.public["seeds"]) == 2 and reaper.voided == 1

    t.play(scene)


def test_an_expired_hand_makes_no_seats_card_public_before_the_hold(held_table_factory: HeldFactory) -> None:
    """A hand the co-dealer ended at its lifetime gave public shares of every dealt position:
    with the dealer's own share, the seats' cards. Now only once the hold has passed."""
    t = held_table_factory(lifetime_ms=1000)
    codealer, seat = t.codealer, SeatKey.generate()

    async def scene() -> None:
        hand_id = await t.open_hand()
        await t.draw(hand_id, 2, seat)
        t.now[0] += 1001
        assert codealer.expire() == 1
        with pytest.raises(DealerError) as e:
            codealer.share(hand_id, 0, b"", [], 2)
        not_released(e.value)
        refused_reveal(codealer, hand_id)
        t.now[0] += t.hold_ms
        assert len(codealer.share(hand_id, 0, b"", [], 2).shares) == 2

    t.play(scene)


def test_a_ledger_of_the_previous_schema_opens_and_its_seals_release_only_by_the_hold(
    held_table: HeldTable,
) -> None:
    """A ledger the previous version made (no release digests, no released_ms) opens and gets both
    columns; a seal made then cannot be released by a token (no digest to check it against), so
    its hand's seed waits for the hold, and is answered after it."""
    t = held_table
    seat = SeatKey.generate()

    async def deal() -> tuple[str, list[bytes]]:
        hand_id = await t.open_hand()
        return hand_id, t.releases(hand_id, await t.draw(hand_id, 2, seat), seat)

    hand_id, tokens = t.play(deal)
    t.codealer.ledger.close()
    with sqlite3.connect(t.directory / "codealer.db") as db:  # back to the previous version's schema
        db.execute("ALTER TABLE seals DROP COLUMN release_sha256")
        db.execute("ALTER TABLE hands DROP COLUMN released_ms")
    ledger = Ledger(t.directory / "codealer.db", create=False)
    reopened = t.reopened(ledger)
    with sqlite3.connect(t.directory / "codealer.db") as db:
        assert db.execute("SELECT release_sha256 FROM seals").fetchall() == [(None,), (None,)]
    refused_reveal(reopened, hand_id, tokens)
    t.now[0] += t.hold_ms
    assert reopened.reveal(hand_id) == reopened._secrets(reopened._row(hand_id))[1]
    ledger.close()


def test_a_dealer_whose_codealer_holds_seeds_past_its_lifetime_says_so_once(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """Voids carry no releases, so a co-dealer hold longer than the dealer's lifetime (less the
    void's margin) keeps abandoned hands open past it: the dealer reads the hold from GetIdentity
    and warns once, naming both options and the fix."""
    init_codealer(tmp_path / "cd1")
    with CodealerProcess(
        tmp_path / "cd1", "127.0.0.1:0", "--reveal-hold", "120", forker=serve_forker
    ) as codealer:
        identity = codealer.stub().GetIdentity(codealer_pb2.GetIdentityRequest(), timeout=60)
        assert identity.reveal_hold_ms == 120_000
        flags = (*codealer.dealer_flags(), "--max-hand-lifetime", "60")
        with DealerProcess(tmp_path / "data", tmp_path / "dealer.log", *flags, forker=serve_forker) as dealer:
            line = "(its --reveal-hold), over this dealer's --max-hand-lifetime of 60 s"
            wait_for("the hold said", lambda: line in dealer.stderr(), timeout=60)
            log = dealer.stderr()
    assert log.count(line) == 1, log
    assert "give the co-dealer --reveal-hold 58 or less" in log
