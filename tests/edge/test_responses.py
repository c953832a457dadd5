"""The servicer fills a response's own fields in place (no Hand or DealtHand built only to be
copied): every kind of record says in its message exactly what the record holds, receipts at
index 0 present, client seeds, reveal fields and a transcript that verifies."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from fairdeck.core.decks import DeckSpec
from fairdeck.core.transcript import Transcript
from fairdeck.core.verify import verify
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.edge.dealer_servicer import DealerServicer, deal_hands_response
from fairdeck_server.storage.base import HandRecord, StoredHandState
from fairdeck_server.storage.sqlite import SqliteStorage


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
        chunks += [c async for c in await dealer.deal_hands("t", "standard", 40, ["x"], False)]
        # Each chunk with the records storage holds for its hands, to check the messages against.
        stored = []
        for chunk in chunks:
            ids = [h for s in chunk for h in s.batch.hand_ids]
            records = [await storage.get_hand("t", h) for h in ids]
            stored.append((chunk, records, [c for s in chunk for c in s.cards]))
    finally:
        await storage.close()
    return servicer, [first, seeded, dealt, closed], stored


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[DealerServicer, list[HandRecord], list[Any]]:
    return asyncio.run(_records(tmp_path_factory.mktemp("responses")))


STATES = {
    StoredHandState.OPEN: pb.HAND_STATE_OPEN,
    StoredHandState.SHUFFLED: pb.HAND_STATE_SHUFFLED,
    StoredHandState.CLOSED: pb.HAND_STATE_CLOSED,
}


def check_hand(message: pb.Hand, record: HandRecord) -> None:
    """``message`` says what ``record`` holds, field by field, and nothing else."""
    assert (message.hand_id, message.deck, message.version) == (record.hand_id, record.deck, record.version)
    assert message.commitment == record.commitment and message.state == STATES[record.state]
    assert tuple(message.client_seeds) == record.client_seeds
    assert (message.dealt_count, message.deck_size) == (record.dealt, DeckSpec.parse(record.deck).size)
    assert message.HasField("commit_receipt") and message.commit_receipt.index == record.commit_index
    assert message.create_time.ToMilliseconds() == record.created_ms
    assert message.HasField("reveal_receipt") == (record.reveal_index is not None)
    if record.reveal_index is not None:
        assert message.reveal_receipt.index == record.reveal_index
    assert message.HasField("close_time") == (record.closed_ms is not None)
    assert message.HasField("transcript") == (record.closed_ms is not None)
    if record.closed_ms is not None:
        assert message.close_time.ToMilliseconds() == record.closed_ms
        t = message.transcript
        transcript = Transcript(
            t.version, t.deck, t.hand_id, t.commitment, t.server_seed, tuple(t.client_seeds), tuple(t.cards)
        )
        verify(transcript)
        assert (t.hand_id, t.commitment, t.server_seed) == (
            record.hand_id,
            record.commitment,
            record.server_seed,
        )
        assert tuple(t.client_seeds) == record.client_seeds
        assert len(t.cards) == DeckSpec.parse(record.deck).size


def test_a_hand_message_says_what_its_record_holds(made: Any) -> None:
    servicer, records, _ = made
    assert records[0].commit_index == 0  # the receipt at index 0 must still be present
    assert {r.state for r in records} == set(STATES)
    for record in records:
        check_hand(servicer.hand(record), record)
        response = pb.DealNewHandResponse(cards=[1, 2])
        servicer.hand(record, response.hand)  # filled in place: the same message
        check_hand(response.hand, record)
        assert list(response.cards) == [1, 2]


def test_deal_hands_messages_say_what_their_records_hold(made: Any) -> None:
    """Each hand of a DealHands message says what storage holds for it: its id, commitment,
    receipts and, for a hand created closed, its seed, whose transcript verifies."""
    _, _, chunks = made
    assert any(len(chunk) > 1 for chunk, _, _ in chunks)  # 40 hands: two slices in one message
    assert {r.state for _, records, _ in chunks for r in records} == {
        StoredHandState.CLOSED,
        StoredHandState.SHUFFLED,
    }
    for chunk, records, cards in chunks:
        got = deal_hands_response("standard", chunk)
        assert got.deck == "standard" and got.version == records[0].version
        assert len(got.hands) == len(records) == len(cards)
        for dealt, record, deck in zip(got.hands, records, cards, strict=True):
            assert (dealt.hand_id, dealt.commitment) == (record.hand_id, record.commitment)
            assert tuple(dealt.cards) == deck and record.dealt == len(deck) == 52
            assert dealt.HasField("commit_receipt") and dealt.commit_receipt.index == record.commit_index
            assert dealt.server_seed == (record.server_seed or b"")
            assert dealt.HasField("reveal_receipt") == (record.reveal_index is not None)
            if record.reveal_index is not None:
                assert dealt.reveal_receipt.index == record.reveal_index == record.commit_index + 1
                transcript = Transcript(
                    record.version, record.deck, record.hand_id, record.commitment,
                    record.server_seed or b"", record.client_seeds, deck,
                )  # fmt: skip
                verify(transcript)
