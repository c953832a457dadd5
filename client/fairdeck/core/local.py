"""A hand dealt in this process, without a dealer: open (seed and commitment), then reveal.

For tests, replays and simulations; pure: the entropy source is passed in.

>>> sealed = open_local("standard", "h1", entropy=lambda n: bytes(n))
>>> len(sealed.commitment), "server_seed" in repr(sealed)
(32, False)
>>> reveal_local(sealed, ["alice"]).cards[:3]
(1, 22, 10)
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fairdeck.core.commitment import commit
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.seeds import check_hand_id, new_server_seed, normalize_client_seeds
from fairdeck.core.transcript import Transcript
from fairdeck.core.versions import CURRENT_VERSION, check_version


@dataclass(frozen=True)
class SealedHand:
    """A hand whose commitment is published and whose seed is still secret."""

    version: str
    deck: str
    hand_id: str
    commitment: bytes
    server_seed: bytes = field(repr=False)
    """Secret until the hand closes; kept out of repr so it cannot reach a log."""


def open_local(
    deck: str,
    hand_id: str,
    *,
    entropy: Callable[[int], bytes] = secrets.token_bytes,
    version: str = CURRENT_VERSION,
) -> SealedHand:
    """Draw a server seed for a new hand and commit to it."""
    check_version(version)
    spec = DeckSpec.parse(deck)
    check_hand_id(hand_id)
    seed = new_server_seed(spec, entropy)
    return SealedHand(version, spec.name, hand_id, commit(spec.name, hand_id, seed, version=version), seed)


def reveal_local(sealed: SealedHand, client_seeds: Sequence[str | bytes] = ()) -> Transcript:
    """Derive the deck from the sealed seed and the client seeds: the full transcript."""
    seeds = normalize_client_seeds(client_seeds)
    cards = derive_deck(sealed.deck, sealed.hand_id, sealed.server_seed, seeds, version=sealed.version)
    return Transcript(
        version=sealed.version,
        deck=sealed.deck,
        hand_id=sealed.hand_id,
        commitment=sealed.commitment,
        server_seed=sealed.server_seed,
        client_seeds=seeds,
        cards=cards,
    )


@dataclass(frozen=True)
class LocalHand:
    """A hand dealt in this process, without a dealer: its whole transcript.

    Not the SDK's ``fairdeck.client.DealtHand`` (one hand of a dealer's batch deal).
    """

    transcript: Transcript


def deal_local(
    deck: str,
    hand_id: str,
    client_seeds: Sequence[str | bytes] = (),
    *,
    entropy: Callable[[int], bytes] = secrets.token_bytes,
) -> LocalHand:
    """Open and reveal in one step (for tests, replays and simulations)."""
    return LocalHand(reveal_local(open_local(deck, hand_id, entropy=entropy), client_seeds))
