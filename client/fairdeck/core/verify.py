"""Verification of a revealed hand (spec section 6).

``verify`` returns None when every step holds and raises ``VerificationError``
naming the first step that fails. Digests and decks are compared in constant
time.

>>> from fairdeck.core.local import deal_local
>>> verify(deal_local("standard", "h1", entropy=lambda n: bytes(n)).transcript)
"""

from __future__ import annotations

import hmac

from fairdeck.core.commitment import COMMITMENT_BYTES, commit
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.encoding import pack_cards
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.seeds import check_hand_id, check_server_seed, normalize_client_seeds
from fairdeck.core.transcript import Transcript
from fairdeck.core.versions import check_version


def verify(transcript: Transcript) -> None:
    """Check a revealed hand; raise VerificationError on the first failed step."""
    # Step 6.1: the algorithm version is known.
    try:
        check_version(transcript.version)
    except InvalidInput as e:
        raise VerificationError("version", str(e)) from None

    # Step 6.2: every field is well formed for this version and deck.
    try:
        spec = DeckSpec.parse(transcript.deck)
        check_hand_id(transcript.hand_id)
        check_server_seed(spec, transcript.server_seed)
        if not all(isinstance(s, bytes) for s in transcript.client_seeds):
            raise InvalidInput("client seeds must be the bytes as used, not text")
        normalize_client_seeds(transcript.client_seeds)  # count and length bounds
        for position, card_id in enumerate(transcript.cards):
            if not spec.contains(card_id):
                raise InvalidInput(f"cards[{position}]: card id {card_id!r} is not in deck {spec.name!r}")
    except InvalidInput as e:
        raise VerificationError("malformed", str(e)) from None
    if len(transcript.commitment) != COMMITMENT_BYTES:
        raise VerificationError("malformed", f"commitment must be {COMMITMENT_BYTES} bytes")
    if len(transcript.cards) != spec.size:
        raise VerificationError(
            "malformed", f"deck {spec.name!r} has {spec.size} cards, transcript lists {len(transcript.cards)}"
        )

    # Step 6.3: the revealed server seed opens the published commitment.
    expected = commit(spec.name, transcript.hand_id, transcript.server_seed, version=transcript.version)
    if not hmac.compare_digest(expected, transcript.commitment):
        raise VerificationError(
            "commitment", "the revealed server seed does not match the published commitment"
        )

    # Step 6.4: the deck re-derived from the seeds is the deck that was dealt.
    derived = derive_deck(
        spec,
        transcript.hand_id,
        transcript.server_seed,
        transcript.client_seeds,
        version=transcript.version,
    )
    if not hmac.compare_digest(pack_cards(derived), pack_cards(transcript.cards)):
        first = next(i for i, (a, b) in enumerate(zip(derived, transcript.cards, strict=True)) if a != b)
        raise VerificationError(
            "deck", f"the dealt deck differs from the re-derived deck, first at position {first}"
        )
