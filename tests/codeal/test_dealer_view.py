"""What the dealer holds during a hand names no hole card better than chance (spec section 13.2).

The dealer's whole state for a hand is its key ``x_0``, its seed ``S_0`` (so its permutation and
randomness) and public values. An attacker with all of it, over many hands, tries both things it
can: decrypting with ``x_0`` alone, and undoing the one permutation it knows. The control shows
the same attacker reads every card when the co-dealer's shuffle is not really one.
"""

from __future__ import annotations

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import card_points, initial_deck
from fairdeck.codeal.group import mul, sub
from fairdeck.codeal.keys import new_holder
from fairdeck.codeal.shuffle import permutation, randomness, shuffle_deck
from fairdeck.core.decks import DeckSpec
from tests.support.codeal_hands import rng

HANDS = 300
SPEC = DeckSpec.parse("short")


def attack(hands: int, codealer_shuffles: bool) -> tuple[int, int]:
    """(cards named right at position 0, partial decryptions that gave a card) over ``hands``."""
    random = rng(2026)
    named = decrypted = 0
    for h in range(hands):
        hand_id = f"view-{h}"
        holders = [new_holder(SPEC, hand_id, k, random) for k in range(2)]
        ctx = HandContext(
            SPEC, hand_id, tuple(x.record.key for x in holders), tuple(x.record.commitment for x in holders)
        )
        psi0 = permutation(SPEC, hand_id, 0, holders[0].seed)
        d1 = shuffle_deck(
            initial_deck(SPEC), psi0, randomness(SPEC, hand_id, 0, holders[0].seed), ctx.joint_key
        )
        psi1 = (
            permutation(SPEC, hand_id, 1, holders[1].seed) if codealer_shuffles else tuple(range(SPEC.size))
        )
        d2 = shuffle_deck(d1, psi1, randomness(SPEC, hand_id, 1, holders[1].seed), ctx.joint_key)
        truth = SPEC.card_ids[psi0[psi1[0]]]
        # What the dealer can do alone: decrypt with its own key, and undo its own permutation.
        x0 = holders[0].x
        if sub(d2[0].c2, mul(x0, d2[0].c1)) in card_points(SPEC):
            decrypted += 1
        guess = SPEC.card_ids[psi0[0]]
        named += guess == truth
    return named, decrypted


def test_the_dealers_own_secrets_name_no_card_better_than_chance() -> None:
    named, decrypted = attack(HANDS, codealer_shuffles=True)
    assert decrypted == 0
    # Chance is 1/36 (about 8 of 300); 25 or more happens by chance with probability 1.5e-6.
    assert named < 25, named


def test_control_without_the_co_dealers_shuffle_the_dealer_reads_every_card() -> None:
    named, decrypted = attack(60, codealer_shuffles=False)
    assert named == 60 and decrypted == 0
