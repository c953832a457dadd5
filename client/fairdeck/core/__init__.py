"""fairdeck.core: the pure fairness core, everything a verifier needs to re-derive and check a hand.

It owns the cards and deck specs, client and server seeds, the unbiased shuffle, the derivation of a deck
from its seeds, the commitment, the transcript and its strict JSON reader, verification, the byte
encodings, the version list and the in-process dealing of ``deal_local``. It imports nothing outside the
standard library and ``cryptography``: no grpc, no protobuf, nothing else of fairdeck
(tests/test_boundaries.py checks this).
"""

from fairdeck.core.cards import Card, CardError
from fairdeck.core.commitment import commit
from fairdeck.core.decks import SPEC_NAMES, DeckSpec, DeckSpecError
from fairdeck.core.derivation import derive_deck
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.local import LocalHand, SealedHand, deal_local, open_local, reveal_local
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
    "deal_local",
    "derive_deck",
    "normalize_client_seed",
    "open_local",
    "reveal_local",
    "server_seed_length",
    "verify",
]
