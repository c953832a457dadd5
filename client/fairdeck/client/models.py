"""The SDK's public types: small frozen dataclasses, never raw protobuf.

Each has ``from_proto`` (and ``to_proto`` where a caller sends it), so the
generated types stay behind this module and invariants are checked in one
place.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from fairdeck.core.cards import Card
from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import VerificationError
from fairdeck.core.transcript import Transcript
from fairdeck.core.verify import verify
from fairdeck.v1 import dealer_pb2 as pb


class HandState(enum.Enum):
    OPEN = "open"
    """Committed; client seeds may still be added."""
    SHUFFLED = "shuffled"
    """Seeds fixed; cards may be drawn."""
    CLOSED = "closed"
    """Revealed."""

    @classmethod
    def from_proto(cls, value: int) -> HandState:
        return {1: cls.OPEN, 2: cls.SHUFFLED, 3: cls.CLOSED}[value]


@dataclass(frozen=True)
class LogReceipt:
    """Where an entry sits in the transparency log."""

    index: int


@dataclass(frozen=True)
class Hand:
    """A hand as the dealer reports it."""

    hand_id: str
    deck: str
    version: str
    commitment: bytes
    """The commitment published at open (docs/fairness-spec.md section 2)."""
    state: HandState
    client_seeds: tuple[bytes, ...]
    dealt_count: int
    deck_size: int
    commit_receipt: LogReceipt
    reveal_receipt: LogReceipt | None
    transcript: Transcript | None
    """The revealed hand; None until closed."""
    create_time: datetime
    close_time: datetime | None

    @classmethod
    def from_proto(cls, m: pb.Hand) -> Hand:
        closed = m.HasField("transcript")
        return cls(
            hand_id=m.hand_id,
            deck=m.deck,
            version=m.version,
            commitment=m.commitment,
            state=HandState.from_proto(m.state),
            client_seeds=tuple(m.client_seeds),
            dealt_count=m.dealt_count,
            deck_size=m.deck_size,
            commit_receipt=LogReceipt(m.commit_receipt.index),
            reveal_receipt=LogReceipt(m.reveal_receipt.index) if m.HasField("reveal_receipt") else None,
            transcript=transcript_from_proto(m.transcript) if closed else None,
            create_time=_time(m.create_time),
            close_time=_time(m.close_time) if m.HasField("close_time") else None,
        )

    def verify(self, *, commitment: bytes | None = None, dealt: Sequence[Card] = ()) -> None:
        """Check this closed hand locally with the core; raise VerificationError.

        Pass the ``commitment`` you saw when the hand opened: the check then
        also proves the dealer revealed the seed it had committed to then.
        Pass the cards you were ``dealt`` (every draw, burns included, in
        order): the check then also proves they are the top of the revealed deck.
        """
        _verify(self.transcript, self.commitment, commitment, dealt)


def _verify(
    transcript: Transcript | None, published: bytes, commitment: bytes | None, dealt: Sequence[Card]
) -> None:
    """What ``Hand.verify`` and ``DealtHand.verify`` check."""
    if transcript is None:
        raise VerificationError("malformed", "the hand is not closed; there is nothing to verify yet")
    for seen in (published,) if commitment is None else (published, commitment):
        if not hmac.compare_digest(seen, transcript.commitment):
            raise VerificationError("commitment", "the transcript's commitment is not the one published")
    verify(transcript)
    revealed = transcript.cards[: len(dealt)]
    if len(dealt) > len(transcript.cards) or tuple(c.id for c in dealt) != revealed:
        raise VerificationError("deck", "the cards dealt are not the top of the revealed deck")


@dataclass(frozen=True)
class Draw:
    """Cards drawn from the top of a hand's deck."""

    cards: tuple[Card, ...]
    position: int
    """Deck position of the first card (0 is the top)."""
    remaining: int


@dataclass(frozen=True)
class DealtHand:
    """One hand of a batch deal."""

    hand_id: str
    deck: str
    version: str
    commitment: bytes
    cards: tuple[Card, ...]
    commit_receipt: LogReceipt
    server_seed: bytes | None
    """The revealed seed when the batch was closed, else None."""
    reveal_receipt: LogReceipt | None
    transcript: Transcript | None = None
    """The revealed hand when the batch was closed (``deal_hands(..., close=True)``), else None:
    its seed, commitment and deck as the dealer sent them, and the client seeds this client
    sent."""

    def verify(self, *, commitment: bytes | None = None) -> None:
        """Check this hand of a closed batch locally with the core, as ``Hand.verify`` does;
        raise VerificationError. The cards it was dealt (``cards``, the whole deck) must be the
        revealed deck. Pass the ``commitment`` if you saw it elsewhere first (a log entry)."""
        _verify(self.transcript, self.commitment, commitment, self.cards)


def cards(deck: str, ids: Iterable[int]) -> tuple[Card, ...]:
    return DeckSpec.parse(deck).cards_for_ids(ids)


def transcript_from_proto(m: pb.Transcript) -> Transcript:
    return Transcript(
        version=m.version,
        deck=m.deck,
        hand_id=m.hand_id,
        commitment=m.commitment,
        server_seed=m.server_seed,
        client_seeds=tuple(m.client_seeds),
        cards=tuple(m.cards),
    )


def client_seed_to_proto(seed: str | bytes) -> pb.ClientSeed:
    if isinstance(seed, str):
        return pb.ClientSeed(text=seed)
    if isinstance(seed, bytes | bytearray | memoryview):
        return pb.ClientSeed(data=bytes(seed))
    raise TypeError(f"client seed must be str or bytes, got {type(seed).__name__}")


def _time(ts: Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)
