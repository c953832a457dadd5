"""Players' seeds the dealer cannot predict: commit, then reveal.

Each player makes a fresh random seed after seeing the dealer's commitment (``PlayerSeed.create``)
and sends only its commitment, which binds the hand, the dealer's commitment and the seat.
``SeedRound`` refuses a reveal before every seat has committed, and a seed that does not open its
commitment, naming the seat; its ``seeds`` go to ``shuffle`` in seat order. The steps:
docs/api.md, "Players' seeds"; why this order, and the commitment's bytes: docs/fairness-spec.md
section 8.4, "Who must not predict which seed".

>>> dealer_commitment = bytes(32)
>>> alice = PlayerSeed.create("h1", 0, dealer_commitment)
>>> bob = PlayerSeed.create("h1", 1, dealer_commitment)
>>> table = SeedRound("h1", dealer_commitment, seats=2)
>>> table.commit(0, alice.commitment); table.commit(1, bob.commitment)
>>> table.reveal(0, alice.reveal(table.commitments)); table.reveal(1, bob.reveal(table.commitments))
>>> [len(s) for s in table.seeds]
[32, 32]
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from fairdeck.core.encoding import lp, u32
from fairdeck.core.errors import VerificationError

SEED_BYTES = 32
TAG = b"fairdeck player-seed v1"
SDK_SEED_PREFIX = "fairdeck-sdk-seed:"
"""The text the SDK's own seed starts with, so a transcript says which seed the SDK added."""


class SeedOrderError(Exception):
    """A step of the seed protocol out of order: a commitment after a reveal, a reveal before
    every seat committed, a seat twice, or the seeds asked for before every reveal."""


def seed_commitment(hand_id: str, dealer_commitment: bytes, seat: int, seed: bytes) -> bytes:
    """A player's commitment to ``seed`` for ``seat`` of this hand (docs/fairness-spec.md section 8.4)."""
    return hashlib.sha256(
        lp(TAG) + lp(hand_id.encode("utf-8")) + lp(dealer_commitment) + u32(seat) + lp(seed)
    ).digest()


def sdk_seed() -> str:
    """The seed the SDK adds when a game server shuffles with none: 32 fresh random bytes, as hex
    text after ``fairdeck-sdk-seed:`` so the transcript shows where it came from."""
    return SDK_SEED_PREFIX + secrets.token_hex(SEED_BYTES)


@dataclass(frozen=True)
class PlayerSeed:
    """The player's side: a fresh seed, made after the dealer's commitment was seen."""

    hand_id: str
    seat: int
    dealer_commitment: bytes
    seed: bytes = field(repr=False)

    @classmethod
    def create(cls, hand_id: str, seat: int, dealer_commitment: bytes) -> PlayerSeed:
        """A new random seed for this seat. Refused without the dealer's 32-byte commitment:
        a seed made before it exists is one the dealer could know when it commits."""
        if not isinstance(dealer_commitment, bytes) or len(dealer_commitment) != 32:
            raise SeedOrderError("no dealer commitment has been shown: open the hand before making seeds")
        return cls(hand_id, seat, dealer_commitment, secrets.token_bytes(SEED_BYTES))

    @property
    def commitment(self) -> bytes:
        return seed_commitment(self.hand_id, self.dealer_commitment, self.seat, self.seed)

    def reveal(self, commitments: Sequence[bytes]) -> bytes:
        """The seed, once every seat's commitment is on the table and ours is at our seat."""
        if self.seat >= len(commitments) or not hmac.compare_digest(commitments[self.seat], self.commitment):
            raise VerificationError(
                "seeds", f"seat {self.seat}: our commitment is not on the table at our seat"
            )
        return self.seed


class SeedRound:
    """The game server's side: collects every seat's commitment, then every reveal, in that order."""

    def __init__(self, hand_id: str, dealer_commitment: bytes, seats: int) -> None:
        if not isinstance(dealer_commitment, bytes) or len(dealer_commitment) != 32:
            raise SeedOrderError("a seed round starts after the dealer's commitment: open the hand first")
        if seats < 1:
            raise ValueError("a seed round needs at least one seat")
        self.hand_id = hand_id
        self.dealer_commitment = dealer_commitment
        self._commitments: list[bytes | None] = [None] * seats
        self._seeds: list[bytes | None] = [None] * seats

    @property
    def commitments(self) -> tuple[bytes, ...]:
        """Every seat's commitment, in seat order; SeedOrderError until all are in."""
        if any(c is None for c in self._commitments):
            missing = [i for i, c in enumerate(self._commitments) if c is None]
            raise SeedOrderError(f"seats {missing} have not committed")
        return tuple(c for c in self._commitments if c is not None)

    def commit(self, seat: int, commitment: bytes) -> None:
        if any(s is not None for s in self._seeds):
            raise SeedOrderError("a commitment after a reveal: every seat commits before any seat reveals")
        self._seat(seat)
        if self._commitments[seat] is not None:
            raise SeedOrderError(f"seat {seat} has committed already")
        if not isinstance(commitment, bytes) or len(commitment) != 32:
            raise ValueError(f"seat {seat}: a commitment is 32 bytes")
        self._commitments[seat] = commitment

    def reveal(self, seat: int, seed: bytes) -> None:
        """Take a seat's seed; it must open that seat's commitment (compared in constant time)."""
        commitments = self.commitments  # every seat first
        self._seat(seat)
        if self._seeds[seat] is not None:
            raise SeedOrderError(f"seat {seat} has revealed already")
        opened = seed_commitment(self.hand_id, self.dealer_commitment, seat, seed)
        if not hmac.compare_digest(opened, commitments[seat]):
            raise VerificationError(
                "seeds", f"seat {seat}'s revealed seed does not open its commitment: abandon the hand"
            )
        self._seeds[seat] = seed

    @property
    def seeds(self) -> tuple[bytes, ...]:
        """The seeds for ``shuffle``, in seat order; SeedOrderError until every seat revealed."""
        missing = [i for i, s in enumerate(self._seeds) if s is None]
        if missing:
            raise SeedOrderError(f"seats {missing} have not revealed")
        return tuple(s for s in self._seeds if s is not None)

    def _seat(self, seat: int) -> None:
        if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < len(self._commitments):
            raise ValueError(f"no seat {seat!r}: seats are 0 to {len(self._commitments) - 1}")
