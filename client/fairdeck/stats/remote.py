"""Decks from a live dealer, each verified against its commitment as it arrives.

``fairdeck stats --target`` samples through the SDK's ``DealHands`` with ``close=True``. Every
hand is checked before it is counted: its revealed seed must open its commitment (compared with
``hmac.compare_digest``) and re-derive exactly the cards dealt, with the client seed this command
sent, so a dealer that dealt anything but its committed deck fails the run whatever the
statistics say. Each batch carries its own client seed; with several targets, batches go
round-robin and their decks are pooled (docs/stats/README.md, "Decks from a live dealer").
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import grpc

from fairdeck.client import DealerClient
from fairdeck.client.models import DealtHand
from fairdeck.core.commitment import commit
from fairdeck.core.decks import DeckSpec
from fairdeck.core.derivation import derive_deck
from fairdeck.core.errors import InvalidInput
from fairdeck.stats.sampling import decks_to_ranks
from fairdeck.stats.tally import DeckTally, hash_keys

BATCH = 10_000
"""Hands per DealHands call."""
MAX_LISTED = 10
"""Verification failures described in the report (all are counted)."""


@dataclass
class DealerSample:
    """What the dealer dealt, counted, and how many of its hands verified."""

    targets: tuple[str, ...]
    tally: DeckTally
    verified: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def check_hand(hand: DealtHand, deck: str, client_seed: str) -> str | None:
    """Why this revealed hand does not verify, or None when it does."""
    if hand.deck != deck:
        return f"hand {hand.hand_id}: deck {hand.deck!r}, asked for {deck!r}"
    if hand.server_seed is None:
        return f"hand {hand.hand_id}: no server seed revealed"
    try:
        expected = commit(hand.deck, hand.hand_id, hand.server_seed, version=hand.version)
        if not hmac.compare_digest(expected, hand.commitment):
            return f"hand {hand.hand_id}: the revealed seed does not open the commitment"
        cards = derive_deck(hand.deck, hand.hand_id, hand.server_seed, [client_seed], version=hand.version)
    except InvalidInput as e:
        return f"hand {hand.hand_id}: {e}"
    if cards != tuple(c.id for c in hand.cards):
        return f"hand {hand.hand_id}: the cards dealt are not the deck the seeds derive"
    return None


def sample_dealer(
    targets: Sequence[str],
    deck: str,
    decks: int,
    seed: str,
    *,
    credentials: grpc.ChannelCredentials | None = None,
    api_token: str | None = None,
    insecure: bool = False,
    timeout: float = 30.0,
    progress: Callable[[int], object] | None = None,
    batch: int = BATCH,
) -> DealerSample:
    """Deal ``decks`` hands from the dealer(s), verify each, and count them.

    ``progress`` is called after each batch with the number of hands it dealt.
    """
    n = DeckSpec.parse(deck).size
    result = DealerSample(tuple(targets), DeckTally.empty(n))
    keys = hash_keys(seed, n)
    began = time.perf_counter()
    clients = [
        DealerClient(t, credentials=credentials, api_token=api_token, timeout=timeout, insecure=insecure)
        for t in targets
    ]
    try:
        done, index = 0, 0
        while done < decks:
            count = min(batch, decks - done)
            client_seed = f"fairdeck-stats:{seed}:{index}"
            dealer = clients[index % len(clients)]
            hands = list(dealer.deal_hands(deck, count, client_seeds=[client_seed], close=True))
            if len(hands) != count:
                raise RuntimeError(
                    f"dealer {dealer.config.target} returned {len(hands)} hands, asked for {count}"
                )
            for hand in hands:
                problem = check_hand(hand, deck, client_seed)
                if problem is None:
                    result.verified += 1
                else:
                    result.failed += 1
                    if len(result.failures) < MAX_LISTED:
                        result.failures.append(problem)
            result.tally.add(decks_to_ranks([tuple(c.id for c in h.cards) for h in hands], deck), keys)
            done += count
            index += 1
            if progress is not None:
                progress(count)
    finally:
        for client in clients:
            client.close()
    result.seconds = time.perf_counter() - began
    return result
