"""fairdeck: provably fair card decks.

The pure core (cards, decks, seeds, derivation, commitment, verification) is
importable without grpc; the client SDK for the dealer service lives beside it.

>>> from fairdeck import deal_hand, verify
>>> hand = deal_hand("standard", "demo-1", ["alice", "bob"])
>>> verify(hand.transcript)
"""

from fairdeck.core.cards import Card, CardError
from fairdeck.core.commitment import commit
from fairdeck.core.dealing import LocalHand, SealedHand, deal_hand, open_hand, reveal
from fairdeck.core.decks import SPEC_NAMES, DeckSpec, DeckSpecError
from fairdeck.core.derivation import derive_deck
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.seeds import (
    MAX_CLIENT_SEED_BYTES,
    MAX_CLIENT_SEEDS,
    MAX_HAND_ID_LENGTH,
    SeedError,
    normalize_client_seed,
    server_seed_length,
)
from fairdeck.core.transcript import Transcript
from fairdeck.core.verify import verify
from fairdeck.core.versions import CURRENT_VERSION, SUPPORTED_VERSIONS, UnknownVersion

__all__ = [
    "CURRENT_VERSION",
    "MAX_CLIENT_SEEDS",
    "MAX_CLIENT_SEED_BYTES",
    "MAX_HAND_ID_LENGTH",
    "SPEC_NAMES",
    "SUPPORTED_VERSIONS",
    "Card",
    "CardError",
    "DeckSpec",
    "DeckSpecError",
    "InvalidInput",
    "LocalHand",
    "SealedHand",
    "SeedError",
    "Transcript",
    "UnknownVersion",
    "VerificationError",
    "commit",
    "deal_hand",
    "derive_deck",
    "normalize_client_seed",
    "open_hand",
    "reveal",
    "server_seed_length",
    "verify",
]
