"""Every key holder in one process: a whole co-dealt hand, for tests, vectors and benchmarks.

``codeal_local`` plays the protocol of docs/codealing-spec.md with all ``K`` holders at once: keys,
shuffles in holder order (each checking the ones before it), shares for the dealt positions. A
real deployment runs each holder in its own process; the bytes are the same.

>>> import random
>>> rng = random.Random(1).randbytes
>>> from fairdeck.codeal.verify import verify_hand
>>> hand = codeal_local("short", "h1", 2, [0, 1], rng)
>>> verify_hand(hand)
"""

from __future__ import annotations

from collections.abc import Sequence

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import initial_deck
from fairdeck.codeal.group import Random
from fairdeck.codeal.keys import HolderSecrets, new_holder
from fairdeck.codeal.proof import prove_shuffle, verify_shuffle
from fairdeck.codeal.record import sign_shuffle
from fairdeck.codeal.shares import make_share, open_card
from fairdeck.codeal.shuffle import check_fresh, permutation, randomness, shuffle_deck
from fairdeck.codeal.verify import CodealHand, DealtPosition
from fairdeck.core.decks import DeckSpec


def codeal_local(
    deck: str,
    hand_id: str,
    holders: int,
    positions: Sequence[int],
    random: Random,
    *,
    secrets: Sequence[HolderSecrets] | None = None,
) -> CodealHand:
    """A co-dealt hand with ``holders`` key holders and the given positions dealt, seeds revealed."""
    spec = DeckSpec.parse(deck)
    if secrets is None:
        secrets = [new_holder(spec, hand_id, k, random) for k in range(holders)]
    ctx = HandContext(
        spec, hand_id, tuple(s.record.key for s in secrets), tuple(s.record.commitment for s in secrets)
    )
    deck_k = initial_deck(spec)
    records = []
    for k, holder in enumerate(secrets):
        psi = permutation(spec, hand_id, k, holder.seed)
        rs = randomness(spec, hand_id, k, holder.seed)
        after = shuffle_deck(deck_k, psi, rs, ctx.joint_key)
        proof = prove_shuffle(ctx, k, deck_k, after, psi, rs, random)
        check_fresh(deck_k, after, k)
        verify_shuffle(ctx, k, deck_k, after, proof)
        records.append(sign_shuffle(ctx, k, deck_k, after, proof, holder.x, random).encode())
        deck_k = after
    dealt = []
    for p in positions:
        shares = [make_share(ctx, p, k, s.x, deck_k[p], random) for k, s in enumerate(secrets)]
        dealt.append(
            DealtPosition(p, open_card(ctx, p, deck_k[p], shares), tuple(x.encode() for x in shares))
        )
    return CodealHand(
        deck,
        hand_id,
        tuple(s.record.encode() for s in secrets),
        tuple(records),
        tuple(dealt),
        tuple(s.seed for s in secrets),
    )
