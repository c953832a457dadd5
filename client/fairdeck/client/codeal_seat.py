"""Co-dealt hands in the SDK: the game server's calls, and a seat's device with its own key.

``CodealHands(client)`` opens, draws and closes co-dealt hands through a ``DealerClient`` (its
channel, credentials, retries and exceptions). ``SeatKey.generate()`` makes the key on the device
(its secret never leaves it); the game server passes ``seat.public_key`` as DrawCards'
``seat_public_key``. ``open_cards`` first checks that every co-dealer signed, under the identity
key the player pinned, that it sealed the position to this seat's own key (spec 9.2), then opens
each holder's sealed share with the seat's key, verifies each DLEQ share and combines them.
``seat_releases`` gives, once the seat's play is over, its release tokens (spec 9.3) for
``close_hand``: without every seat's, the co-dealer keeps its seed. ``verify_codeal_hand``
checks a closed co-dealt Hand (spec section 10, identities against pinned keys). ``hand_proof``
writes format 4; ``codeal_proof`` format 5, with the receipts ``codeal_receipts`` fetches through
an ``AuditClient``, when the Hand says where its entries are. Needs libsodium.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from fairdeck.client.audit_client import AuditClient
from fairdeck.client.calls import USE_CLIENT_DEFAULT, Timeout
from fairdeck.client.dealer_client import DealerClient
from fairdeck.codeal.context import HandContext
from fairdeck.codeal.entries import SEALS, decode_entry
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.handfile import CodealerSignatures, CodealHandProof
from fairdeck.codeal.keys import KeyRecord
from fairdeck.codeal.logged_proof import CodealerSeals, CodealReceipts, LoggedCodealProof
from fairdeck.codeal.record import ShuffleRecord
from fairdeck.codeal.seal import seat_public_key, seat_release
from fairdeck.codeal.seal_statement import SealStatement, open_seat_card
from fairdeck.codeal.verify import CodealHand, DealtPosition
from fairdeck.core.cards import Card
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


@dataclass(frozen=True)
class SealedDraw:
    """The positions drawn: their shares (sealed to the seat, or public) and, for a public draw,
    the cards."""

    position: int
    sealed_cards: tuple[pb.SealedCard, ...]
    cards: tuple[Card, ...]
    remaining: int


class CodealHands:
    """The game server's side of co-dealt hands, through a ``DealerClient``. Hands are the
    contract's ``Hand`` messages (their ``codeal`` record is what ``open_cards``, ``hand_proof``
    and ``verify_codeal_hand`` read)."""

    def __init__(self, client: DealerClient) -> None:
        self.client = client

    def open_hand(self, deck: str = "standard", *, timeout: Timeout = USE_CLIENT_DEFAULT) -> pb.Hand:
        """Open a co-dealt hand: both holders have shuffled, and proved it, when this returns."""
        request = pb.OpenHandRequest(deck=deck, mode=pb.DEAL_MODE_CODEALT)
        response: pb.OpenHandResponse = self.client._unary("OpenHand", request, timeout=timeout)
        return response.hand

    def draw(
        self,
        hand_id: str,
        count: int = 1,
        *,
        seat_public_key: bytes = b"",
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SealedDraw:
        """The next ``count`` positions, sealed to ``seat_public_key`` (a seat's ``SeatKey.public_key``),
        or public (community cards) without one."""
        request = pb.DrawCardsRequest(hand_id=hand_id, count=count, seat_public_key=seat_public_key)
        r: pb.DrawCardsResponse = self.client._unary("DrawCards", request, timeout=timeout)
        spec = DeckSpec.parse(r.deck)
        cards = tuple(spec.card_for_id(c) for c in r.cards)
        return SealedDraw(r.position, tuple(r.sealed_cards), cards, r.remaining_count)

    def deal_seats(
        self,
        hand_id: str,
        count: int,
        seat_public_keys: Sequence[bytes],
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> list[tuple[pb.SealedCard, ...]]:
        """``count`` cards to each seat, in one call: one tuple of sealed cards per seat, in order."""
        request = pb.DrawCardsRequest(hand_id=hand_id, count=count, seat_public_keys=seat_public_keys)
        r: pb.DrawCardsResponse = self.client._unary("DrawCards", request, timeout=timeout)
        cards = tuple(r.sealed_cards)
        return [cards[i * count : (i + 1) * count] for i in range(len(seat_public_keys))]

    def close_hand(
        self,
        hand_id: str,
        *,
        seat_releases: Sequence[bytes] = (),
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> pb.Hand:
        """Close: both seeds revealed, every dealt position's public shares, the hand checked.
        ``seat_releases``: every seat's tokens (``seat_releases()`` on each seat's device); with one
        seat's missing the co-dealer refuses (FailedPrecondition SEATS_NOT_RELEASED, the hand stays
        open) until its hold has passed."""
        request = pb.CloseHandRequest(hand_id=hand_id, seat_releases=seat_releases)
        response: pb.CloseHandResponse = self.client._unary("CloseHand", request, timeout=timeout)
        return response.hand

    def get_hand(self, hand_id: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> pb.Hand:
        response: pb.GetHandResponse = self.client._unary(
            "GetHand", pb.GetHandRequest(hand_id=hand_id), timeout=timeout
        )
        return response.hand


def _context(hand: pb.Hand) -> tuple[DeckSpec, HandContext]:
    spec = DeckSpec.parse(hand.deck)
    records = [KeyRecord.decode(bytes(r), k) for k, r in enumerate(hand.codeal.key_records)]
    ctx = HandContext(spec, hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    return spec, ctx


def open_cards(
    hand: pb.Hand, sealed_cards: Sequence[pb.SealedCard], seat: SeatKey, identity_keys: Sequence[bytes]
) -> list[int]:
    """The card ids of ``sealed_cards`` on the seat's device. ``identity_keys`` are the co-dealers'
    Ed25519 keys the player pinned (holders 1..K-1 in order; never the ones the hand names). Each
    position's co-dealer seal statements must verify under them and name this seat's own key
    (spec 9.2: else the dealer may have read the card), then each share is opened with ``seat``,
    verified and combined (9, 10.5, 10.6); CodealError names the step and the position."""
    spec, ctx = _context(hand)
    shuffles = hand.codeal.shuffle_records
    final = ShuffleRecord.decode(bytes(shuffles[-1]), spec.size, len(shuffles) - 1).deck
    cards = []
    for sealed in sealed_cards:
        seals = [
            SealStatement(s.holder, s.seat_public_key, s.sealed_share_sha256, s.signature)
            for s in sealed.seals
        ]
        shares = [bytes(data) for data in sealed.shares]
        cards.append(open_seat_card(ctx, final, sealed.position, shares, seals, seat.secret, identity_keys))
    return cards


def seat_releases(hand: pb.Hand, sealed_cards: Sequence[pb.SealedCard], seat: SeatKey) -> list[bytes]:
    """On the seat's device, once its play is over: its release token (spec 9.3) of each co-dealer's
    share of ``sealed_cards`` (holders 1..K-1), each checked to open with ``seat``'s key first
    (CodealError otherwise). Secrets until the hand is closed: never log them."""
    spec = DeckSpec.parse(hand.deck)
    return [
        seat_release(spec, hand.hand_id, card.position, k, bytes(data), seat.secret)
        for card in sealed_cards
        for k, data in enumerate(card.shares)
        if k >= 1
    ]


def hand_proof(hand: pb.Hand, *, seat_public_key: bytes | None = None) -> CodealHandProof:
    """The one-file proof (docs/hand-proof.md, format 4) of a co-dealt Hand (closed: with seeds).

    With ``seat_public_key``, only the positions dealt to that seat: its player's own cards, all
    that the player's page then shows (every shuffle is still the whole deck's). ValueError when
    the hand dealt that seat no card."""
    record = hand.codeal
    if seat_public_key is not None and not any(d.seat_public_key == seat_public_key for d in record.dealt):
        raise ValueError(f"hand {hand.hand_id} dealt no card to that seat")
    return CodealHandProof(
        CodealHand(
            hand.deck,
            hand.hand_id,
            tuple(bytes(r) for r in record.key_records),
            tuple(bytes(r) for r in record.shuffle_records),
            tuple(
                DealtPosition(d.position, d.card, tuple(bytes(s) for s in d.shares))
                for d in record.dealt
                if seat_public_key is None or d.seat_public_key == seat_public_key
            ),
            tuple(bytes(s) for s in record.seeds) if record.seeds else None,
        ),
        tuple(
            CodealerSignatures(
                i.holder,
                bytes(i.identity_key),
                bytes(i.key_record_signature),
                bytes(i.shuffle_record_signature),
            )
            for i in record.identities
        ),
    )


def verify_codeal_hand(hand: pb.Hand, identity_keys: Sequence[bytes]) -> None:
    """A co-dealt hand: every co-dealer's identity signatures under the pinned keys (holders 1..K-1
    in order), then spec section 10 whole. None, or CodealError naming the step."""
    hand_proof(hand).verify(identity_keys)


def codeal_receipts(audit: AuditClient, hand: pb.Hand) -> CodealReceipts | None:
    """The receipts of a closed co-dealt hand's setup, seals and seeds entries, all to the checkpoint
    of the seeds entry's (the latest), each verified by ``audit`` against its log keys; None when the
    Hand does not say where they are (not closed, or closed before the dealer noted it, or before
    it logged seals entries: then there is no seals entry for each co-dealer)."""
    at = hand.codeal.log_indexes
    codealers = len(hand.codeal.key_records) - 1
    if not (at.HasField("setup") and at.HasField("seeds")) or len(at.seals) != codealers:
        return None
    seeds = audit.inclusion_proof(at.seeds, codealt=True)
    size = seeds.tree_size
    return CodealReceipts(
        audit.inclusion_proof(at.setup, tree_size=size, codealt=True),
        tuple(audit.inclusion_proof(i, tree_size=size, codealt=True) for i in at.seals),
        seeds,
    )


def logged_hand_proof(
    hand: pb.Hand,
    receipts: CodealReceipts,
    *,
    log_key: str,
    key_rotations: Sequence[bytes] = (),
    seat_public_key: bytes | None = None,
) -> LoggedCodealProof:
    """The one-file proof of format 5 (docs/hand-proof.md) of a closed co-dealt Hand: format 4's
    (``hand_proof``), each position's seat key, and the co-dealers' seal statements read from the
    seals entries the ``receipts`` prove. ValueError when a seals receipt is not of a seals entry."""
    proof = hand_proof(hand, seat_public_key=seat_public_key)
    seat_keys = tuple(
        bytes(d.seat_public_key)
        for d in hand.codeal.dealt
        if seat_public_key is None or d.seat_public_key == seat_public_key
    )
    seals = []
    for receipt in receipts.seals:
        try:
            entry = decode_entry(receipt.entry)
        except CodealError as e:
            raise ValueError(f"a seals receipt of hand {hand.hand_id}: {e.detail}") from None
        if entry.kind != SEALS or entry.hand_id != hand.hand_id:
            raise ValueError(f"a seals receipt of hand {hand.hand_id} is not of its seals entry")
        seals.append(CodealerSeals(entry.position, tuple(entry.seals())))
    return LoggedCodealProof(proof, seat_keys, tuple(seals), receipts, log_key, tuple(key_rotations))


def codeal_proof(
    audit: AuditClient, hand: pb.Hand, *, seat_public_key: bytes | None = None
) -> LoggedCodealProof | CodealHandProof:
    """A closed co-dealt hand's proof: format 5 with its receipts (fetched and verified through
    ``audit``) when the dealer says where its entries are, else format 4."""
    receipts = codeal_receipts(audit, hand)
    if receipts is None:
        return hand_proof(hand, seat_public_key=seat_public_key)
    log_key = audit.verifiers[0].to_string()
    return logged_hand_proof(hand, receipts, log_key=log_key, seat_public_key=seat_public_key)
