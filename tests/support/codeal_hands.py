"""A co-dealt hand built step by step, so a test can play any holder honestly or not."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from fairdeck.codeal.context import HandContext
from fairdeck.codeal.elgamal import Deck, initial_deck
from fairdeck.codeal.group import Random, Scalar
from fairdeck.codeal.keys import HolderSecrets, new_holder
from fairdeck.codeal.proof import prove_shuffle
from fairdeck.codeal.record import ShuffleRecord, sign_shuffle
from fairdeck.codeal.shares import make_share, open_card
from fairdeck.codeal.shuffle import permutation, randomness, shuffle_deck
from fairdeck.codeal.verify import CodealHand, DealtPosition
from fairdeck.core.decks import DeckSpec


def rng(seed: int) -> Random:
    return random.Random(seed).randbytes


@dataclass
class Table:
    """The holders of one hand and what they published so far."""

    spec: DeckSpec
    hand_id: str
    holders: list[HolderSecrets]
    random: Random
    records: list[ShuffleRecord] = field(default_factory=list)

    @property
    def ctx(self) -> HandContext:
        return HandContext(
            self.spec,
            self.hand_id,
            tuple(h.record.key for h in self.holders),
            tuple(h.record.commitment for h in self.holders),
        )

    @property
    def deck(self) -> Deck:
        return self.records[-1].deck if self.records else initial_deck(self.spec)

    def witness(self, k: int) -> tuple[tuple[int, ...], tuple[Scalar, ...]]:
        h = self.holders[k]
        return permutation(self.spec, self.hand_id, k, h.seed), randomness(self.spec, self.hand_id, k, h.seed)

    def shuffle(
        self,
        k: int,
        psi: Sequence[int] | None = None,
        rs: Sequence[Scalar] | None = None,
        after: Deck | None = None,
        signer: int | None = None,
    ) -> ShuffleRecord:
        """Holder ``k``'s shuffle; any part may be replaced by an attacker's."""
        honest_psi, honest_rs = self.witness(k)
        psi, rs = psi or honest_psi, rs or honest_rs
        before = self.deck
        if after is None:
            after = shuffle_deck(before, psi, rs, self.ctx.joint_key)
        proof = prove_shuffle(self.ctx, k, before, after, psi, rs, self.random)
        x = self.holders[k if signer is None else signer].x
        record = sign_shuffle(self.ctx, k, before, after, proof, x, self.random)
        self.records.append(record)
        return record

    def shuffle_all(self) -> Table:
        for k in range(len(self.holders)):
            self.shuffle(k)
        return self

    def hand(self, positions: Sequence[int] = (0, 1, 2), *, seeds: bool = True) -> CodealHand:
        ctx, deck = self.ctx, self.deck
        dealt = []
        for p in positions:
            shares = [make_share(ctx, p, k, h.x, deck[p], self.random) for k, h in enumerate(self.holders)]
            card = open_card(ctx, p, deck[p], shares)
            dealt.append(DealtPosition(p, card, tuple(s.encode() for s in shares)))
        return CodealHand(
            self.spec.name,
            self.hand_id,
            tuple(h.record.encode() for h in self.holders),
            tuple(r.encode() for r in self.records),
            tuple(dealt),
            tuple(h.seed for h in self.holders) if seeds else None,
        )


def table(deck: str = "short", hand_id: str = "hand-1", holders: int = 2, seed: int = 1) -> Table:
    spec = DeckSpec.parse(deck)
    r = rng(seed)
    return Table(spec, hand_id, [new_holder(spec, hand_id, k, r) for k in range(holders)], r)


def with_shares(hand: CodealHand, position_index: int, holder: int, share: bytes) -> CodealHand:
    d = hand.dealt[position_index]
    shares = list(d.shares)
    shares[holder] = share
    dealt = list(hand.dealt)
    dealt[position_index] = replace(d, shares=tuple(shares))
    return replace(hand, dealt=tuple(dealt))
