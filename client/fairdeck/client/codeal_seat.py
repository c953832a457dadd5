"""A seat's device in a co-dealt hand: its own X25519 key, and opening its sealed cards.

``SeatKey.generate()`` makes the key on the device (its secret never leaves it); the game server
passes ``seat.public_key`` as DrawCards' ``seat_public_key``. ``open_cards`` opens each holder's
sealed share with the seat's key, verifies each DLEQ share against the hand's public record and
combines them into the card; ``verify_codeal_hand`` checks a closed co-dealt Hand's whole record
with ``fairdeck.codeal`` (spec section 10) and the co-dealers' identity signatures against the
keys the caller pins. Loaded only for co-dealt hands (it needs libsodium).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.identity import key_statement, shuffle_statement, verify_identity
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.record import ShuffleRecord
from fairdeck.codeal.seal import open_sealed_share, seat_public_key
from fairdeck.codeal.shares import Share, open_card, verify_share
from fairdeck.codeal.verify import CodealHand, DealtPosition, verify_hand
from fairdeck.core.decks import DeckSpec
from fairdeck.v1 import dealer_pb2 as pb


@dataclass(frozen=True)
class SeatKey:
    """A seat's X25519 key for one hand."""

    secret: bytes = field(repr=False)
    public_key: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "public_key", seat_public_key(self.secret))

    @classmethod
    def generate(cls) -> SeatKey:
        return cls(secrets.token_bytes(32))


def _context(hand: pb.Hand) -> tuple[DeckSpec, HandContext]:
    spec = DeckSpec.parse(hand.deck)
    records = [KeyRecord.decode(bytes(r), k) for k, r in enumerate(hand.codeal.key_records)]
    ctx = HandContext(spec, hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    return spec, ctx


def open_cards(hand: pb.Hand, sealed_cards: Sequence[pb.SealedCard], seat: SeatKey) -> list[int]:
    """The card ids of ``sealed_cards``, each share opened with ``seat`` and verified (steps 9, 10.5,
    10.6); CodealError names the step that failed."""
    spec, ctx = _context(hand)
    shuffles = hand.codeal.shuffle_records
    final = ShuffleRecord.decode(bytes(shuffles[-1]), spec.size, len(shuffles) - 1).deck
    cards = []
    for sealed in sealed_cards:
        p = sealed.position
        shares = []
        for k, data in enumerate(sealed.shares):
            share = Share.decode(
                open_sealed_share(spec, hand.hand_id, p, k, bytes(data), seat.secret), f"share {k}"
            )
            verify_share(ctx, p, k, final[p], share)
            shares.append(share)
        cards.append(open_card(ctx, p, final[p], shares))
    return cards


def verify_codeal_hand(hand: pb.Hand, identity_keys: Sequence[bytes]) -> None:
    """A closed co-dealt hand: every co-dealer's identity signatures under the pinned keys (holder
    order, holders 1..K-1), then spec section 10 whole. None, or CodealError naming the step."""
    spec, ctx = _context(hand)
    record = hand.codeal
    if len(record.shuffle_records) != ctx.holders:  # 10.3: one shuffle per holder, none skipped
        raise CodealError("transcript", f"want one shuffle per holder in order 0..{ctx.holders - 1}")
    by_holder = {i.holder: i for i in record.identities}
    if sorted(by_holder) != list(range(1, ctx.holders)) or len(identity_keys) != ctx.holders - 1:
        raise CodealError("key", "want one pinned identity per co-dealer (holders 1..K-1)")
    for k in range(1, ctx.holders):
        identity = by_holder[k]
        if bytes(identity.identity_key) != bytes(identity_keys[k - 1]):
            raise CodealError("key", f"holder {k}: not the pinned co-dealer identity")
        key_record = bytes(record.key_records[k])
        verify_identity(
            bytes(identity.identity_key),
            key_statement(spec, hand.hand_id, k, ctx.holders, key_record),
            bytes(identity.key_record_signature),
            "key",
            f"holder {k} key record",
        )
        verify_identity(
            bytes(identity.identity_key),
            shuffle_statement(ctx, bytes(record.shuffle_records[k])),
            bytes(identity.shuffle_record_signature),
            "shuffle",
            f"holder {k} shuffle record",
        )
    verify_hand(
        CodealHand(
            hand.deck,
            hand.hand_id,
            tuple(bytes(r) for r in record.key_records),
            tuple(bytes(r) for r in record.shuffle_records),
            tuple(DealtPosition(d.position, d.card, tuple(bytes(s) for s in d.shares)) for d in record.dealt),
            tuple(bytes(s) for s in record.seeds) if record.seeds else None,
        )
    )
