"""The commitment the dealer publishes before any card is seen (spec section 2).

``C = SHA-256(lp("fairdeck-v1 commit") || lp(deck) || lp(hand_id) || lp(server_seed))``

It binds the server seed, the deck spec, the hand id and the algorithm
version. The deck is derived from the seed under a different domain tag
(section 3), never from ``C``, so publishing ``C`` reveals nothing of it.

>>> commit("standard", "h1", bytes(45)).hex()[:16]
'99ae2133721d9112'
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cache

from fairdeck.core.decks import DeckSpec
from fairdeck.core.encoding import lp
from fairdeck.core.seeds import SeedError, check_hand_id
from fairdeck.core.versions import CURRENT_VERSION, check_version

COMMITMENT_BYTES = 32
_sha256 = hashlib.sha256


@cache
def _prefix(version: str, deck: str) -> bytes:
    check_version(version)
    DeckSpec.parse(deck)
    return lp(f"{version} commit".encode()) + lp(deck.encode("ascii"))


def commit(deck: str, hand_id: str, server_seed: bytes, *, version: str = CURRENT_VERSION) -> bytes:
    """The 32-byte commitment to ``server_seed`` for this hand; InvalidInput for bad inputs."""
    check_hand_id(hand_id)
    if not isinstance(server_seed, bytes):
        raise SeedError("server seed must be bytes")
    return _sha256(_prefix(version, deck) + lp(hand_id.encode("ascii")) + lp(server_seed)).digest()


def committer(deck: str, *, version: str = CURRENT_VERSION) -> Callable[[str, bytes], bytes]:
    """``commit`` for one deck and version, the deck and version checked once: for a dealer
    committing to many hands whose ids and seeds it made itself (already valid).

    >>> committer("standard")("h1", bytes(45)) == commit("standard", "h1", bytes(45))
    True
    """
    prefix = _prefix(version, deck)

    def commit_one(hand_id: str, server_seed: bytes) -> bytes:
        return _sha256(prefix + lp(hand_id.encode("ascii")) + lp(server_seed)).digest()

    return commit_one
