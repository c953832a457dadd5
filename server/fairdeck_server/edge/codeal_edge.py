"""Co-dealt hands at the DealerService: which calls go to ``CodealDealer``, and their messages.

A co-dealt hand is opened by OpenHand with DEAL_MODE_CODEALT (or the server's default); its
DrawCards, CloseHand and GetHand are answered here. Its Hand carries the public ``codeal``
record and no commitment of its own (each key holder commits in its key record). codeal.db
failing is UNAVAILABLE STORAGE_UNAVAILABLE, as the ordinary hands' storage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, TypeVar

from fairdeck.core.decks import DeckSpec
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.wire import Reason
from fairdeck_server import refusals
from fairdeck_server.dealing.codeal_store import CodealRow, CodealStoreError

if TYPE_CHECKING:  # the co-dealt code loads libsodium: only a dealer with --codealer loads it
    from fairdeck_server.dealing.codeal_dealing import CodealDealer

T = TypeVar("T")


class CodealEdge:
    def __init__(self, codeal: CodealDealer | None, *, codeal_default: bool) -> None:
        self.codeal = codeal
        self.default = codeal_default

    def wants(self, mode: int) -> bool:
        """Whether an OpenHand of ``mode`` is co-dealt (refused when there is no co-dealer)."""
        if mode not in (pb.DEAL_MODE_UNSPECIFIED, pb.DEAL_MODE_ORDINARY, pb.DEAL_MODE_CODEALT):
            raise refusals.invalid(
                "mode", Reason.INVALID_MODE, "want DEAL_MODE_ORDINARY or DEAL_MODE_CODEALT"
            )
        codealt = mode == pb.DEAL_MODE_CODEALT or (mode == pb.DEAL_MODE_UNSPECIFIED and self.default)
        if codealt and self.codeal is None:
            raise refusals.codeal(
                Reason.CODEAL_NOT_CONFIGURED, "this dealer has no co-dealer (serve --codealer)", "mode"
            )
        return codealt

    async def owns(self, hand_id: str) -> bool:
        """Whether the hand is co-dealt. Asked for every DrawCards, CloseHand and GetHand,
        ordinary hands too, so it reads off the event loop: the store's lock is held through
        each co-dealt write's fsync, and ordinary calls must not stall behind it."""
        if self.codeal is None:
            return False
        try:
            return await asyncio.to_thread(self.codeal.owns, hand_id)
        except CodealStoreError as e:
            raise refusals.storage_unavailable(str(e)) from None

    def _dealer(self) -> CodealDealer:
        assert self.codeal is not None  # owns() or wants() said so
        return self.codeal

    async def open(self, tenant: str, deck: str) -> pb.Hand:
        return hand(await _stored(self._dealer().open_hand(tenant, deck)))

    async def close(self, tenant: str, hand_id: str, releases: Sequence[bytes] = ()) -> pb.Hand:
        return hand(await _stored(self._dealer().close(tenant, hand_id, releases=releases)))

    async def get(self, tenant: str, hand_id: str) -> pb.Hand:
        return hand(await _stored(self._dealer().get(tenant, hand_id)))

    async def draw(self, tenant: str, request: pb.DrawCardsRequest) -> pb.DrawCardsResponse:
        seats = list(request.seat_public_keys)
        draw = await _stored(
            self._dealer().draw(tenant, request.hand_id, request.count, request.seat_public_key, seats)
        )
        response = pb.DrawCardsResponse(
            cards=draw.cards, position=draw.position, remaining_count=draw.remaining, deck=draw.deck
        )
        for i, shares in enumerate(draw.shares):
            card = response.sealed_cards.add(position=draw.position + i, shares=shares)
            for seal in draw.seals[i] if draw.seals else ():
                card.seals.add(
                    holder=seal.holder,
                    seat_public_key=seal.seat_key,
                    sealed_share_sha256=seal.sealed_sha256,
                    signature=seal.signature,
                )
        return response


async def _stored(call: Awaitable[T]) -> T:
    """``call``, with codeal.db failing a read or write refused UNAVAILABLE STORAGE_UNAVAILABLE
    (as the ordinary hands' storage is), never INTERNAL with a traceback."""
    try:
        return await call
    except CodealStoreError as e:
        raise refusals.storage_unavailable(str(e)) from None


def hand(row: CodealRow) -> pb.Hand:
    """The Hand message of a co-dealt hand."""
    public = row.public
    message = pb.Hand(
        hand_id=row.hand_id,
        deck=row.deck,
        version=public["version"],
        state=pb.HAND_STATE_CLOSED if row.closed_ms is not None else pb.HAND_STATE_SHUFFLED,
        dealt_count=len(public["seats"]),
        deck_size=DeckSpec.parse(row.deck).size,
        mode=pb.DEAL_MODE_CODEALT,
    )
    message.create_time.FromMilliseconds(row.created_ms)
    if row.closed_ms is not None:
        message.close_time.FromMilliseconds(row.closed_ms)
    record = message.codeal
    record.version = public["version"]
    record.key_records.extend(bytes.fromhex(k) for k in public["keys"])
    record.shuffle_records.extend(bytes.fromhex(s) for s in public["shuffles"])
    for i in public["identities"]:
        record.identities.add(
            holder=i["holder"],
            identity_key=bytes.fromhex(i["key"]),
            key_record_signature=bytes.fromhex(i["key_signature"]),
            shuffle_record_signature=bytes.fromhex(i["shuffle_signature"]),
        )
    seats = public["seats"]
    for d in public["dealt"]:
        record.dealt.add(
            position=d["position"],
            card=d["card"],
            shares=[bytes.fromhex(s) for s in d["shares"]],
            seat_public_key=bytes.fromhex(seats[d["position"]]),
        )
    record.seeds.extend(bytes.fromhex(s) for s in public["seeds"])
    # Where its entries are (codeal_log: public["log"]); a hand closed before the seals and seeds
    # indexes were noted has its setup's alone, and its proof is format 4.
    steps = public.get("log", {})
    if "open" in steps:
        record.log_indexes.setup = steps["open"]
    if "seeds" in steps:
        record.log_indexes.seals.extend(steps["seals"])
        record.log_indexes.seeds = steps["seeds"]
    return message
