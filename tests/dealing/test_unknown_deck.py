"""An unknown deck is refused with a message that lists the decks there are (regression: it said
only "unknown deck spec", and a caller had to find the names in the docs), through every method
that takes a deck. The name the caller sent is not echoed back (it could be anything)."""

from __future__ import annotations

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import InvalidArgument
from fairdeck.core.decks import SPEC_NAMES

CALLS = {
    "OpenHand": lambda c, deck: c.open_hand(deck),
    "DealNewHand": lambda c, deck: c.deal_new_hand(deck),
    "DealHands": lambda c, deck: list(c.deal_hands(deck, 1)),
}


@pytest.mark.parametrize("method", sorted(CALLS))
def test_an_unknown_deck_is_refused_with_the_decks_there_are(client: DealerClient, method: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        CALLS[method](client, "standard-52")
    e = refused.value
    assert (e.reason, e.field) == ("UNKNOWN_DECK", "deck")
    assert str(e) == f"deck: unknown deck spec; known: {', '.join(SPEC_NAMES)}"


def test_the_callers_text_is_not_echoed(client: DealerClient) -> None:
    with pytest.raises(InvalidArgument) as refused:
        client.open_hand("../../etc/passwd\n")
    assert "passwd" not in str(refused.value) and "\n" not in str(refused.value)
