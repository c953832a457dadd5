"""The whole life of a hand against a real dealer (real SQLite, real gRPC),
through the public SDK, sync and async: every deck spec, every way to deal,
batches, idempotent opens and closes. Every closed hand is verified locally
with the core, never trusted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace

import grpc
import pytest

import fairdeck
from fairdeck import SPEC_NAMES, DeckSpec, Transcript, VerificationError, derive_deck
from fairdeck.client import AsyncDealerClient, DealerClient
from fairdeck.client.exceptions import HandAlreadyShuffled, HandClosed, NotEnoughCards, RequestIdReused
from fairdeck.client.models import Hand, HandState
from fairdeck.core.cards import Card

ALL_DECKS = ("standard", "jokers", "short", *(f"shoe-{n}" for n in range(1, 9)))

# Four seats add their seeds one by one; text is NFC-normalised by the dealer.
SEATS: tuple[str | bytes, ...] = ("alice", "bob", "Cafe\u0301", b"\x00\x01seat-4")
SEATS_AS_USED = (b"alice", b"bob", "Caf\u00e9".encode(), b"\x00\x01seat-4")

# Hold'em for four seats: two rounds of hole cards, then burn+flop, burn+turn, burn+river.
HOLDEM = [1] * 8 + [1, 3, 1, 1, 1, 1]


def ids(cards: Iterable[Card]) -> tuple[int, ...]:
    return tuple(card.id for card in cards)


def check_closed(closed: Hand, opened: Hand, drawn: tuple[int, ...], seeds: tuple[bytes, ...]) -> None:
    """A closed hand: its transcript starts with what was drawn and verifies
    against the commitment published at open, with the SDK and the core."""
    t = closed.transcript
    assert t is not None
    assert closed.state is HandState.CLOSED
    assert closed.close_time is not None
    assert closed.reveal_receipt is not None
    assert closed.reveal_receipt.index > closed.commit_receipt.index
    assert closed.commit_receipt == opened.commit_receipt
    assert closed.commitment == opened.commitment == t.commitment
    assert (t.hand_id, t.deck, t.version) == (opened.hand_id, opened.deck, fairdeck.CURRENT_VERSION)
    assert t.client_seeds == seeds == closed.client_seeds
    assert t.cards[: len(drawn)] == drawn
    assert len(t.server_seed) == fairdeck.server_seed_length(DeckSpec.parse(t.deck))
    closed.verify(commitment=opened.commitment)
    fairdeck.core.verify(t)
    fairdeck.core.verify(Transcript.from_json(t.to_json()))
    assert derive_deck(t.deck, t.hand_id, t.server_seed, t.client_seeds) == t.cards


def test_full_lifecycle_sync(client: DealerClient) -> None:
    opened = client.open_hand("standard")
    assert opened.state is HandState.OPEN
    assert (opened.deck, opened.deck_size, opened.dealt_count) == ("standard", 52, 0)
    assert opened.version == fairdeck.CURRENT_VERSION
    assert len(opened.commitment) == 32
    assert opened.client_seeds == ()
    assert opened.transcript is None and opened.reveal_receipt is None and opened.close_time is None
    hid = opened.hand_id

    for i, seed in enumerate(SEATS):
        seated = client.add_client_seeds(hid, [seed])
        assert seated.state is HandState.OPEN
        assert seated.client_seeds == SEATS_AS_USED[: i + 1]
        assert seated.commitment == opened.commitment

    shuffled = client.shuffle(hid, ["button-seat-2"])
    seeds = (*SEATS_AS_USED, b"button-seat-2")
    assert shuffled.state is HandState.SHUFFLED
    assert shuffled.client_seeds == seeds
    assert shuffled.dealt_count == 0
    assert shuffled.transcript is None  # the seed stays secret until the hand closes

    drawn: list[int] = []
    for n in HOLDEM:
        draw = client.draw(hid, n)
        assert draw.position == len(drawn)
        assert len(draw.cards) == n
        assert draw.remaining == 52 - len(drawn) - n
        drawn.extend(ids(draw.cards))
    assert len(set(drawn)) == len(drawn) == sum(HOLDEM) == 16

    mid = client.get(hid)
    assert mid.state is HandState.SHUFFLED
    assert mid.dealt_count == 16
    assert mid.transcript is None

    closed = client.close_hand(hid)
    check_closed(closed, opened, tuple(drawn), seeds)
    assert client.get(hid) == closed

    # The checks above can fail: a wrong commitment or a tampered deck is caught.
    with pytest.raises(VerificationError):
        closed.verify(commitment=bytes(32))
    t = closed.transcript
    assert t is not None
    swapped = (t.cards[1], t.cards[0], *t.cards[2:])
    with pytest.raises(VerificationError):
        fairdeck.core.verify(replace(t, cards=swapped))
    with pytest.raises(VerificationError):
        fairdeck.core.verify(replace(t, client_seeds=t.client_seeds[:-1]))


def test_full_lifecycle_async(run_async) -> None:  # type: ignore[no-untyped-def]
    async def scenario(c: AsyncDealerClient) -> None:
        opened = await c.open_hand("short")
        hid = opened.hand_id
        assert (opened.state, opened.deck_size) == (HandState.OPEN, 36)
        for i, seed in enumerate(SEATS):
            seated = await c.add_client_seeds(hid, [seed])
            assert seated.client_seeds == SEATS_AS_USED[: i + 1]
        shuffled = await c.shuffle(hid)
        assert shuffled.state is HandState.SHUFFLED
        drawn: list[int] = []
        for n in HOLDEM:
            draw = await c.draw(hid, n)
            assert (draw.position, len(draw.cards), draw.remaining) == (len(drawn), n, 36 - len(drawn) - n)
            drawn.extend(ids(draw.cards))
        assert (await c.get(hid)).dealt_count == 16
        closed = await c.close_hand(hid)
        check_closed(closed, opened, tuple(drawn), SEATS_AS_USED)

        # Many hands at once on one channel, each through its whole life.
        async def one(i: int) -> None:
            o = await c.open_hand("standard")
            await c.add_client_seeds(o.hand_id, [f"seat-{i}"])
            first = await c.draw(o.hand_id, 2)
            rest = await c.deal(o.hand_id)
            assert rest.position == 2
            done = await c.close_hand(o.hand_id)
            check_closed(done, o, ids(first.cards) + ids(rest.cards), (f"seat-{i}".encode(),))

        await asyncio.gather(*(one(i) for i in range(25)))

        deal = await c.deal_new_hand("shoe-2", client_seeds=["x"])
        assert sorted(ids(deal.cards)) == list(range(104))
        closed = await c.close_hand(deal.hand.hand_id)
        check_closed(closed, deal.hand, ids(deal.cards), (b"x",))

        batch = [h async for h in c.deal_hands("jokers", 300, client_seeds=["y"], close=True)]
        assert len({h.hand_id for h in batch}) == 300
        for h in batch:
            assert h.server_seed is not None
            fairdeck.core.verify(
                Transcript(h.version, h.deck, h.hand_id, h.commitment, h.server_seed, (b"y",), ids(h.cards))
            )

        with pytest.raises(HandClosed):
            await c.shuffle(hid)
        drawn_from = await c.open_hand("standard")
        await c.draw(drawn_from.hand_id, 1)
        with pytest.raises(HandAlreadyShuffled):
            await c.add_client_seeds(drawn_from.hand_id, ["late"])

    run_async(scenario)


def test_deck_specs_are_the_documented_ones() -> None:
    assert SPEC_NAMES == ALL_DECKS


@pytest.mark.parametrize("deck", ALL_DECKS)
def test_deal_new_hand_every_deck(client: DealerClient, deck: str) -> None:
    spec = DeckSpec.parse(deck)
    deal = client.deal_new_hand(deck, client_seeds=["table-7", b"\xff"])
    hand = deal.hand
    assert hand.deck == deck
    assert hand.state is HandState.SHUFFLED
    assert hand.deck_size == hand.dealt_count == spec.size
    assert hand.transcript is None
    drawn = ids(deal.cards)
    assert sorted(drawn) == sorted(spec.card_ids)  # a permutation of this deck
    assert drawn != spec.card_ids  # and actually shuffled
    closed = client.close_hand(hand.hand_id)
    assert closed.transcript is not None
    assert closed.transcript.cards == drawn
    check_closed(closed, hand, drawn, (b"table-7", b"\xff"))


@pytest.mark.parametrize("deck", ALL_DECKS)
def test_open_draw_all_close_every_deck(client: DealerClient, deck: str) -> None:
    spec = DeckSpec.parse(deck)
    opened = client.open_hand(deck)
    assert (opened.deck, opened.deck_size) == (deck, spec.size)
    client.add_client_seeds(opened.hand_id, [f"seat-{deck}"])
    drawn: list[int] = []
    for n in [1, 7]:
        drawn.extend(ids(client.draw(opened.hand_id, n).cards))
    while len(drawn) < spec.size:
        n = min(50, spec.size - len(drawn))
        draw = client.draw(opened.hand_id, n)
        assert draw.position == len(drawn)
        drawn.extend(ids(draw.cards))
        assert draw.remaining == spec.size - len(drawn)
    assert sorted(drawn) == sorted(spec.card_ids)
    with pytest.raises(NotEnoughCards):
        client.draw(opened.hand_id, 1)
    closed = client.close_hand(opened.hand_id)
    assert closed.transcript is not None and closed.transcript.cards == tuple(drawn)
    check_closed(closed, opened, tuple(drawn), (f"seat-{deck}".encode(),))


def test_draw_auto_shuffles_an_open_hand(client: DealerClient) -> None:
    opened = client.open_hand("jokers")
    hid = opened.hand_id
    client.add_client_seeds(hid, ["a"])
    client.add_client_seeds(hid, [b"b"])
    first = client.draw(hid, 2)
    assert first.position == 0
    hand = client.get(hid)
    assert hand.state is HandState.SHUFFLED
    assert hand.client_seeds == (b"a", b"b")
    assert hand.dealt_count == 2
    with pytest.raises(HandAlreadyShuffled):
        client.add_client_seeds(hid, ["too-late"])
    with pytest.raises(HandAlreadyShuffled):
        client.shuffle(hid, ["too-late"])
    check_closed(client.close_hand(hid), opened, ids(first.cards), (b"a", b"b"))

    # With no client seed at all, the first draw shuffles with none.
    bare = client.open_hand("standard")
    top = client.draw(bare.hand_id, 1)
    check_closed(client.close_hand(bare.hand_id), bare, ids(top.cards), ())


def test_deal_hand_returns_the_rest(client: DealerClient) -> None:
    opened = client.open_hand("standard")
    hid = opened.hand_id
    first = client.draw(hid, 5)
    rest = client.deal(hid)
    assert rest.position == 5
    assert len(rest.cards) == 47
    assert rest.remaining == 0
    assert client.get(hid).dealt_count == 52
    empty = client.deal(hid)
    assert (empty.cards, empty.position) == ((), 52)
    with pytest.raises(NotEnoughCards):
        client.draw(hid, 1)
    check_closed(client.close_hand(hid), opened, ids(first.cards) + ids(rest.cards), ())

    # On a hand never drawn from, DealHand shuffles and deals the whole deck.
    whole = client.open_hand("short")
    everything = client.deal(whole.hand_id)
    assert everything.position == 0 and len(everything.cards) == 36
    check_closed(client.close_hand(whole.hand_id), whole, ids(everything.cards), ())


@pytest.mark.parametrize("close", [True, False], ids=["closed", "open"])
def test_deal_hands_batch(client: DealerClient, run_async, close: bool) -> None:  # type: ignore[no-untyped-def]
    before = client.open_hand("standard")  # the batch's log entries come after this one
    seeds = ("tournament-9", b"\x01\x02")
    used = (b"tournament-9", b"\x01\x02")
    hands = list(client.deal_hands("standard", 600, client_seeds=seeds, close=close))
    assert len(hands) == 600  # more than two streamed chunks
    assert len({h.hand_id for h in hands}) == 600
    assert len({h.commitment for h in hands}) == 600
    assert len({ids(h.cards) for h in hands}) == 600

    indexes: list[int] = []
    for h in hands:
        assert (h.deck, h.version) == ("standard", fairdeck.CURRENT_VERSION)
        assert sorted(ids(h.cards)) == list(range(52))
        indexes.append(h.commit_receipt.index)
        if close:
            assert h.server_seed is not None and h.reveal_receipt is not None
            indexes.append(h.reveal_receipt.index)
            t = Transcript(h.version, h.deck, h.hand_id, h.commitment, h.server_seed, used, ids(h.cards))
            fairdeck.core.verify(t)
        else:
            assert h.server_seed is None and h.reveal_receipt is None
    assert indexes == sorted(set(indexes)), "log indexes must be distinct and increasing"
    assert indexes[0] > before.commit_receipt.index

    if close:
        for h in hands[::97]:
            got = client.get(h.hand_id)
            assert got.state is HandState.CLOSED
            assert got.transcript is not None and got.transcript.server_seed == h.server_seed
            assert got.reveal_receipt == h.reveal_receipt
            got.verify(commitment=h.commitment)
        return

    for h in hands[::97]:
        got = client.get(h.hand_id)
        assert (got.state, got.dealt_count, got.transcript) == (HandState.SHUFFLED, 52, None)

    async def close_all(c: AsyncDealerClient) -> list[Hand]:
        return list(await asyncio.gather(*(c.close_hand(h.hand_id) for h in hands)))

    closed = run_async(close_all)
    reveals = []
    for h, done in zip(hands, closed, strict=True):
        assert done.hand_id == h.hand_id
        assert done.commit_receipt == h.commit_receipt
        assert done.transcript is not None and done.transcript.cards == ids(h.cards)
        assert done.transcript.client_seeds == used
        done.verify(commitment=h.commitment)
        assert done.reveal_receipt is not None
        reveals.append(done.reveal_receipt.index)
    assert len(set(reveals)) == 600
    assert min(reveals) > max(indexes)


def test_open_is_idempotent_by_request_id(client: DealerClient) -> None:
    a = client.open_hand("standard", request_id="table-1:hand-42")
    b = client.open_hand("standard", request_id="table-1:hand-42")
    assert (b.hand_id, b.commitment, b.commit_receipt) == (a.hand_id, a.commitment, a.commit_receipt)
    other = client.open_hand("standard", request_id="table-1:hand-43")
    assert other.hand_id != a.hand_id and other.commitment != a.commitment

    with pytest.raises(RequestIdReused) as refused:
        client.open_hand("short", request_id="table-1:hand-42")
    assert refused.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert (refused.value.reason, refused.value.field) == ("REQUEST_ID_REUSED", "request_id")

    # A retry after the hand moved on still names the same hand, as it is now.
    client.draw(a.hand_id, 3)
    again = client.open_hand("standard", request_id="table-1:hand-42")
    assert (again.hand_id, again.state, again.dealt_count) == (a.hand_id, HandState.SHUFFLED, 3)

    # Neither the retries nor the refusal committed anything: the log grew by one per hand.
    nxt = client.open_hand("standard")
    assert nxt.commit_receipt.index == other.commit_receipt.index + 1

    # Without a request id (the SDK makes a fresh one each call) opens are distinct.
    assert client.open_hand().hand_id != client.open_hand().hand_id


def test_deal_new_hand_is_idempotent_by_request_id(client: DealerClient) -> None:
    first = client.deal_new_hand("shoe-1", client_seeds=["s"], request_id="deal-1")
    retry = client.deal_new_hand("shoe-1", client_seeds=["s"], request_id="deal-1")
    assert retry.hand == first.hand
    assert retry.cards == first.cards
    with pytest.raises(RequestIdReused):
        client.deal_new_hand("standard", client_seeds=["s"], request_id="deal-1")
    client.open_hand("standard", request_id="opened-not-dealt")
    with pytest.raises(RequestIdReused):
        client.deal_new_hand("standard", request_id="opened-not-dealt")


def test_deal_new_hand_request_id_with_other_seeds_is_refused(client: DealerClient) -> None:
    client.deal_new_hand("standard", client_seeds=["player-seed-1"], request_id="deal-2")
    with pytest.raises(RequestIdReused):
        client.deal_new_hand("standard", client_seeds=["player-seed-2"], request_id="deal-2")


def test_deal_new_hand_request_id_of_a_dealt_open_is_refused(client: DealerClient) -> None:
    opened = client.open_hand("standard", request_id="opened-then-dealt")
    client.draw(opened.hand_id, 3)
    client.deal(opened.hand_id)
    with pytest.raises(RequestIdReused):
        client.deal_new_hand("standard", request_id="opened-then-dealt")


def test_close_is_idempotent(client: DealerClient) -> None:
    opened = client.open_hand("standard")
    drawn = ids(client.draw(opened.hand_id, 3).cards)
    first = client.close_hand(opened.hand_id)
    second = client.close_hand(opened.hand_id)
    assert second == first  # same seed, transcript, receipts and close time
    check_closed(second, opened, drawn, ())
    # The second close appended no second reveal to the log.
    assert first.reveal_receipt is not None
    assert client.open_hand().commit_receipt.index == first.reveal_receipt.index + 1


def test_closing_an_open_hand_reveals_it(client: DealerClient) -> None:
    opened = client.open_hand("short")
    client.add_client_seeds(opened.hand_id, ["only-seat"])
    closed = client.close_hand(opened.hand_id)
    assert closed.dealt_count == 0
    check_closed(closed, opened, (), (b"only-seat",))
