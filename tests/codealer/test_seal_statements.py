"""A dealer that hands the co-dealer its own X25519 key in place of a seat's (docs/codealing-spec.md
sections 9.1, 9.2 and 13.2), against a real ``fairdeck codealer`` process: the dealer's side is the
real ``CodealDealer`` and its real gRPC link, driven the way a dishonest operator would drive them.
The dealer reads the card; the victim's device refuses it, naming the position, and holds the
co-dealer's signed statement naming the foreign key. And the co-dealer seals each position once,
across a restart too: a retry gets the same bytes and the same statement, another seat nothing."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fairdeck.client.codeal_seat import SeatKey, _context, open_cards
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.record import ShuffleRecord
from fairdeck.codeal.seal import open_sealed_share, seal_share
from fairdeck.codeal.seal_statement import seal_statement
from fairdeck.codeal.shares import Share, make_share, open_card, verify_share
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.wire import Reason
from fairdeck_server.codealer.ledger import Ledger
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_log import CodealLog
from fairdeck_server.dealing.codeal_store import CodealStore
from fairdeck_server.dealing.dealer import Dealer, _new_hand_id
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.edge.codeal_edge import hand as hand_message
from fairdeck_server.edge.codealer_link import GrpcCoDealerLink
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.forked_serve import ServeForker


async def dealer_for(tmp_path: Path, codealer: CodealerProcess) -> CodealDealer:
    """The real dealer side (no pool), its real link to the co-dealer process, logging to a real
    SQLite log (close it with ``close``)."""
    storage = SqliteStorage(tmp_path / "fairdeck.db")
    await storage.start()
    vault = SeedVault(bytes(range(1, 33)))
    return CodealDealer(
        GrpcCoDealerLink(codealer.target, codealer.token),
        bytes.fromhex(codealer.identity),
        CodealStore(tmp_path / "codeal.db"),
        vault,
        log=CodealLog(Dealer(storage, vault)),
        new_hand_id=_new_hand_id,
        clock_ms=lambda: 1_700_000_000_000,
    )


async def close(dealer: CodealDealer) -> None:
    await dealer.aclose()
    await dealer.log.dealer.storage.close()


def test_a_dealer_that_substitutes_its_own_seat_key_reads_the_card_and_the_victim_refuses_it(
    tmp_path: Path,
    serve_forker: ServeForker,
) -> None:
    init_codealer(tmp_path / "cd1")
    victim, house = SeatKey.generate(), SeatKey.generate()
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        pinned = [bytes.fromhex(codealer.identity)]

        async def attack() -> tuple[
            pb.Hand, list[int], list[bytes], list[bytes], list[list[bytes]], DealerError
        ]:
            dealer = await dealer_for(tmp_path, codealer)
            try:
                row = await dealer.open_hand("t1", "standard")
                # The seat asked for two cards; the dealer asks the co-dealer for them with ITS key.
                _, sealed, signatures = await dealer.link.share(row.hand_id, 0, house.public_key, 2)
                ctx, final, x = dealer._state(row)
                read: list[int] = []
                resealed: list[list[bytes]] = []
                for p in (0, 1):
                    theirs = Share.decode(
                        open_sealed_share(ctx.deck, row.hand_id, p, 1, sealed[p], house.secret), "share 1"
                    )
                    mine = make_share(ctx, p, 0, x, final[p], dealer.random)
                    read.append(open_card(ctx, p, final[p], [mine, theirs]))  # the house sees the card
                    resealed.append(
                        [
                            seal_share(
                                ctx.deck, row.hand_id, p, k, s.encode(), victim.public_key, dealer.random
                            )
                            for k, s in enumerate((mine, theirs))
                        ]
                    )
                # The victim's seat asks again, honestly: the co-dealer will not seal it twice.
                with pytest.raises(DealerError) as again:
                    await dealer.link.share(row.hand_id, 0, victim.public_key, 2)
                return hand_message(row), read, sealed, signatures, resealed, again.value
            finally:
                await close(dealer)

        hand, read, sealed, signatures, resealed, again = asyncio.run(attack())

    assert "SHARE_GIVEN_TO_ANOTHER_SEAT" in str(again) and again.reason == Reason.CODEALER_REFUSED
    # Without the seal statements the resealed shares open on the victim's device, verify, and give
    # exactly the cards the house read: the attack works on a device that does not check 9.2.
    cards = [pb.SealedCard(position=p, shares=resealed[p]) for p in (0, 1)]
    spec, ctx = _context(hand)  # the SDK's own reading of the hand record
    final = ShuffleRecord.decode(bytes(hand.codeal.shuffle_records[-1]), spec.size, 1).deck
    unchecked = []
    for p in (0, 1):
        shares = [
            Share.decode(open_sealed_share(spec, hand.hand_id, p, k, resealed[p][k], victim.secret), "s")
            for k in (0, 1)
        ]
        for k, share in enumerate(shares):
            verify_share(ctx, p, k, final[p], share)
        unchecked.append(open_card(ctx, p, final[p], shares))
    assert unchecked == read

    # The dealer relays the co-dealer's genuine statements: the device refuses, naming the position,
    # and keeps a statement signed by the co-dealer that names the house's key.
    for p in (0, 1):
        digest = hashlib.sha256(sealed[p]).digest()
        cards[p].seals.add(
            holder=1, seat_public_key=house.public_key, sealed_share_sha256=digest, signature=signatures[p]
        )
    with pytest.raises(CodealError) as refused:
        open_cards(hand, cards, victim, pinned)
    assert (refused.value.step, refused.value.detail) == (
        "seal",
        "position 0 was sealed by co-dealer 1 to another key: the dealer may have read this card",
    )
    evidence = seal_statement(ctx, 0, 1, house.public_key, hashlib.sha256(sealed[0]).digest())
    Ed25519PublicKey.from_public_bytes(pinned[0]).verify(signatures[0], evidence)  # transferable

    # Or it forges a statement naming the victim's key, or relays none: refused all the same.
    forged = Ed25519PrivateKey.generate()
    for p in (0, 1):
        del cards[p].seals[:]
        digest = hashlib.sha256(resealed[p][1]).digest()
        signature = forged.sign(seal_statement(ctx, p, 1, victim.public_key, digest))
        cards[p].seals.add(
            holder=1, seat_public_key=victim.public_key, sealed_share_sha256=digest, signature=signature
        )
    with pytest.raises(CodealError) as refused:
        open_cards(hand, cards, victim, pinned)
    assert refused.value.detail == (
        "position 0: co-dealer 1's seal statement does not verify under its pinned identity key"
    )
    for card in cards:
        del card.seals[:]
    with pytest.raises(CodealError) as refused:
        open_cards(hand, cards, victim, pinned)
    assert refused.value.detail == "position 0: want one seal statement per co-dealer, holders 1..1 in order"


def test_the_codealer_seals_a_position_once_even_after_a_restart(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    """Before, a retry to the same seat was sealed afresh (a new ephemeral key): every retry made
    another sealed share, and a statement for each would be another piece of paper per position.
    Now the co-dealer keeps the one it made and answers it again, across a restart too."""
    init_codealer(tmp_path / "cd1")
    alice, bob = SeatKey.generate(), SeatKey.generate()

    async def deal(codealer: CodealerProcess, hand_id: str | None) -> tuple[str, list[bytes], list[bytes]]:
        dealer = await dealer_for(tmp_path, codealer)
        try:
            if hand_id is None:
                hand_id = (await dealer.open_hand("t1", "standard")).hand_id
            _, sealed, signatures = await dealer.link.share(hand_id, 0, alice.public_key, 2)
            return hand_id, sealed, signatures
        finally:
            await close(dealer)

    async def other_seat(codealer: CodealerProcess, hand_id: str) -> DealerError:
        link = GrpcCoDealerLink(codealer.target, codealer.token)
        try:
            with pytest.raises(DealerError) as refused:
                await link.share(hand_id, 1, bob.public_key, 1)
            return refused.value
        finally:
            await link.close()

    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:
        hand_id, sealed, signatures = asyncio.run(deal(codealer, None))
        _, again, again_signatures = asyncio.run(deal(codealer, hand_id))  # a retry, same process
    with CodealerProcess(tmp_path / "cd1", forker=serve_forker) as codealer:  # a restart on the same ledger
        _, restarted, restarted_signatures = asyncio.run(deal(codealer, hand_id))
        refused = asyncio.run(other_seat(codealer, hand_id))
    assert again == restarted == sealed and again_signatures == restarted_signatures == signatures
    assert "SHARE_GIVEN_TO_ANOTHER_SEAT" in str(refused)
    with sqlite3.connect(tmp_path / "cd1" / "codealer.db") as db:
        rows = db.execute("SELECT position, seat_key FROM seals WHERE hand_id = ?", (hand_id,)).fetchall()
    assert sorted(rows) == [(0, alice.public_key), (1, alice.public_key)]
    assert Ledger(tmp_path / "cd1" / "codealer.db").seals(hand_id)[0][1:] == (sealed[0], signatures[0])
