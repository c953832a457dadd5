"""The verifier of a whole co-dealt hand (spec section 10), and the records it reads.

``verify_hand`` takes the bytes a hand publishes (key records, shuffle records, the dealt
positions with their shares and, after the hand, the seeds) and returns None or raises one
``CodealError`` naming the first failing step: encoding, key, transcript, shuffle, share, open,
seed. Every check carries the number of the spec step it implements. Seed comparisons use
``hmac.compare_digest``.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fairdeck.codeal.context import MAX_HOLDERS, MIN_HOLDERS, HandContext
from fairdeck.codeal.elgamal import Deck, initial_deck
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import ZERO
from fairdeck.codeal.keys import KeyRecord, verify_key_record
from fairdeck.codeal.proof import verify_shuffle
from fairdeck.codeal.record import ShuffleRecord, verify_signature
from fairdeck.codeal.shares import Share, open_card, verify_share
from fairdeck.codeal.shuffle import (
    check_fresh,
    check_seed,
    permutation,
    randomness,
    seed_commitment,
    shuffle_deck,
)
from fairdeck.core.decks import DeckSpec, DeckSpecError


@dataclass(frozen=True)
class DealtPosition:
    """A dealt position of the final deck, the card claimed there, and one share per holder."""

    position: int
    card: int
    shares: tuple[bytes, ...]


@dataclass(frozen=True)
class CodealHand:
    """Everything a co-dealt hand publishes, as bytes (section 11); ``seeds`` after it closes."""

    deck: str
    hand_id: str
    keys: tuple[bytes, ...]
    shuffles: tuple[bytes, ...]
    dealt: tuple[DealtPosition, ...]
    seeds: tuple[bytes, ...] | None = None


def verify_hand(hand: CodealHand) -> None:
    """Steps 10.1 to 10.7, in order; None when the hand checks out."""
    # 10.1 encoding: the deck spec, the number of holders, every record's bytes.
    try:
        spec = DeckSpec.parse(hand.deck)
    except DeckSpecError as error:
        raise CodealError("encoding", f"deck: {error}") from None
    n, holders = spec.size, len(hand.keys)
    if not MIN_HOLDERS <= holders <= MAX_HOLDERS:
        raise CodealError("encoding", f"a hand has {MIN_HOLDERS} to {MAX_HOLDERS} key holders, not {holders}")
    records = [KeyRecord.decode(data, k) for k, data in enumerate(hand.keys)]
    shuffles = [ShuffleRecord.decode(data, n, i) for i, data in enumerate(hand.shuffles)]
    dealt = [
        (d, [Share.decode(s, f"position {d.position} share {k}") for k, s in enumerate(d.shares)])
        for d in hand.dealt
    ]
    # 10.2 key: each proof of possession; distinct keys and a joint key that is not the identity.
    for k, record in enumerate(records):
        verify_key_record(spec, hand.hand_id, k, record)
    ctx = HandContext(spec, hand.hand_id, tuple(r.key for r in records), tuple(r.commitment for r in records))
    # 10.3 transcript: one shuffle per holder, in holder order; one share per holder per position.
    if [r.k for r in shuffles] != list(range(holders)):
        raise CodealError("transcript", f"want one shuffle per holder in order 0..{holders - 1}")
    positions = [d.position for d, _ in dealt]
    # type(p) is int: a bool is an int in Python, and True would pass as position 1.
    if len(set(positions)) != len(positions) or not all(type(p) is int and 0 <= p < n for p in positions):
        raise CodealError("transcript", f"dealt positions must be distinct and in 0..{n - 1}")
    for d, shares in dealt:
        if len(shares) != holders:
            raise CodealError(
                "transcript", f"position {d.position}: {len(shares)} shares for {holders} holders"
            )
    # 10.4 shuffle: freshness, the proof against the deck before it, the holder's signature.
    decks = [initial_deck(spec)]
    for r in shuffles:
        check_fresh(decks[-1], r.deck, r.k)
        verify_shuffle(ctx, r.k, decks[-1], r.deck, r.proof)
        verify_signature(ctx, decks[-1], r)
        decks.append(r.deck)
    final = decks[-1]
    for d, shares in dealt:
        # 10.5 share: each DLEQ proof against its holder's key and the ciphertext.
        for k, share in enumerate(shares):
            verify_share(ctx, d.position, k, final[d.position], share)
        # 10.6 open: the shares open to a card of the deck, the card claimed.
        card = open_card(ctx, d.position, final[d.position], shares)
        if type(d.card) is not int or card != d.card:  # a claimed True is not card 1
            raise CodealError("open", f"position {d.position}: the shares open card {card}, not {d.card}")
    if hand.seeds is not None:
        _verify_seeds(ctx, hand, decks)


def _verify_seeds(ctx: HandContext, hand: CodealHand, decks: list[Deck]) -> None:
    """10.7 seed: each seed opens its commitment and re-derives its shuffle; the cards follow."""
    spec, seeds = ctx.deck, hand.seeds or ()
    if len(seeds) != ctx.holders:
        raise CodealError("seed", f"{len(seeds)} seeds for {ctx.holders} holders")
    psis = []
    for k, seed in enumerate(seeds):
        check_seed(spec, seed, k)
        if not hmac.compare_digest(seed_commitment(spec, hand.hand_id, k, seed), ctx.commitments[k]):
            raise CodealError("seed", f"holder {k}: the seed does not open its commitment")
        psi = permutation(spec, hand.hand_id, k, seed)
        rs = randomness(spec, hand.hand_id, k, seed)
        if ZERO in rs:
            raise CodealError("seed", f"holder {k}: the seed derives a zero randomness")
        if shuffle_deck(decks[k], psi, rs, ctx.joint_key) != decks[k + 1]:
            raise CodealError("seed", f"holder {k}: the seed does not re-derive its published shuffle")
        psis.append(psi)
    order = final_order(spec, psis)
    for d in hand.dealt:
        if order[d.position] != d.card:
            raise CodealError("seed", f"position {d.position}: the seeds put card {order[d.position]} there")


def final_order(spec: DeckSpec, psis: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Card ids of the final deck: position ``i`` holds canonical ``psi_0(psi_1(...psi_{K-1}(i)))``."""
    cards = spec.card_ids
    order = []
    for i in range(spec.size):
        j = i
        for psi in reversed(psis):
            j = psi[j]
        order.append(cards[j])
    return tuple(order)
