"""Responses built in place (issue 15) are the messages they were when built from parts.

The servicer used to build a Hand (with a LogReceipt and a Timestamp) and copy it into
the response, and a DealtHand per hand copied into DealHandsResponse. Now it fills the
response's own fields. Here every kind of record, built both ways, serializes to the
same bytes: presence of receipts at index 0, client seeds, reveal fields, transcripts.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import timestamp_pb2

from fairdeck.core.decks import DeckSpec
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck_server.dealer import Dealer
from fairdeck_server.edge.dealer_servicer import DealerServicer, deal_hands_response
from fairdeck_server.storage.base import HandRecord, StoredHandState
from fairdeck_server.storage.sqlite import SqliteStorage
from fairdeck_server.vault import SeedVault


def _from_parts(servicer: DealerServicer, record: HandRecord) -> pb.Hand:
    """The Hand as the servicer built it before issue 15."""
    created = timestamp_pb2.Timestamp()
    created.FromMilliseconds(record.created_ms)
    message = pb.Hand(
        hand_id=record.hand_id,
        deck=record.deck,
        version=record.version,
        commitment=record.commitment,
        state={
            StoredHandState.OPEN: pb.HAND_STATE_OPEN,
            StoredHandState.SHUFFLED: pb.HAND_STATE_SHUFFLED,
            StoredHandState.CLOSED: pb.HAND_STATE_CLOSED,
        }[record.state],
        client_seeds=record.client_seeds,
        dealt_count=record.dealt,
        deck_size=DeckSpec.parse(record.deck).size,
        commit_receipt=pb.LogReceipt(index=record.commit_index),
        create_time=created,
    )
    if record.reveal_index is not None:
        message.reveal_receipt.index = record.reveal_index
    if record.closed_ms is not None:
        message.close_time.FromMilliseconds(record.closed_ms)
        t = servicer.dealer.transcript(record)
        message.transcript.CopyFrom(
            pb.Transcript(
                version=t.version,
                deck=t.deck,
                hand_id=t.hand_id,
                commitment=t.commitment,
                server_seed=t.server_seed,
                client_seeds=t.client_seeds,
                cards=t.cards,
            )
        )
    return message


async def _records(tmp_path: Path) -> tuple[DealerServicer, list[HandRecord], list[Any]]:
    storage = SqliteStorage(tmp_path / "fairdeck.db")
    await storage.start()
    dealer = Dealer(storage, SeedVault(secrets.token_bytes(32)))
    servicer = DealerServicer(dealer)
    try:
        first = await dealer.open_hand("t", "standard", "")  # log index 0
        seeded = await dealer.open_hand("t", "jokers", "rid-1")
        seeded = await dealer.add_client_seeds("t", seeded.hand_id, ["alice", b"\x00bob"])
        dealt, _ = await dealer.deal_new_hand("t", "short", ["carol"], "")
        closed = await dealer.close("t", dealt.hand_id)
        chunks = [c async for c in await dealer.deal_hands("t", "standard", 3, [], True)]
        chunks += [c async for c in await dealer.deal_hands("t", "standard", 2, ["x"], False)]
    finally:
        await storage.close()
    return servicer, [first, seeded, dealt, closed], chunks


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[DealerServicer, list[HandRecord], list[Any]]:
    return asyncio.run(_records(tmp_path_factory.mktemp("responses")))


def test_a_hand_filled_in_place_is_the_hand_built_from_parts(made: Any) -> None:
    servicer, records, _ = made
    assert records[0].commit_index == 0  # the receipt at index 0 must still be present
    for record in records:
        expected = _from_parts(servicer, record)
        assert servicer.hand(record).SerializeToString(deterministic=True) == expected.SerializeToString(
            deterministic=True
        )
        response = pb.DealNewHandResponse(cards=[1, 2])
        servicer.hand(record, response.hand)
        assert response == pb.DealNewHandResponse(hand=expected, cards=[1, 2])
        assert response.hand.HasField("commit_receipt")


def test_deal_hands_messages_built_in_place_are_those_built_from_parts(made: Any) -> None:
    _, _, chunks = made
    assert any(seed for chunk in chunks for _, _, seed in chunk)  # closed hands: seeds and reveals
    assert any(seed is None for chunk in chunks for _, _, seed in chunk)
    for chunk in chunks:
        expected = pb.DealHandsResponse(
            deck="standard",
            version=chunk[0][0].version,
            hands=[
                pb.DealtHand(
                    hand_id=record.hand_id,
                    commitment=record.commitment,
                    cards=cards,
                    commit_receipt=pb.LogReceipt(index=record.commit_index),
                    server_seed=seed or b"",
                    reveal_receipt=None
                    if record.reveal_index is None
                    else pb.LogReceipt(index=record.reveal_index),
                )
                for record, cards, seed in chunk
            ],
        )
        got = deal_hands_response("standard", chunk)
        assert got.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
