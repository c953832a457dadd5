"""Taking a pooled co-dealt deck for a hand: only one its co-dealer still deals.

A deck waits in the pool (codeal.db) with no word from its co-dealer, which may have ended it
meanwhile: ``fairdeck codealer restored`` ends every hand its ledger holds open, pooled decks too,
and a co-dealer that lost its ledger knows none. Handed over as is, such a deck fails the tenant's
first draw (HAND_CLOSED). So the deck next in line is first announced again to its co-dealer (a
repeat, answered from its ledger, no key made; refused HAND_CLOSED for an ended hand, HAND_NOT_FOUND
for one it does not know), then taken (``CodealStore.take`` of that deck: one UPDATE, so an open
racing this one may take it first, and the next is tried). A deck refused so was never a hand and
is dropped; up to the pool's size are tried, then the caller makes one fresh. Any other refusal
(the co-dealer down, or ``held`` refusing just before the take: the record's claim not confirmed) is
the open's, and the deck stays pooled as it was.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from fairdeck_server import refusals
from fairdeck_server.dealing.codeal_ended import ended_there
from fairdeck_server.dealing.codeal_store import CodealRow, CodealStore

log = logging.getLogger(__name__)
HOLDERS = 2
"""The dealer and one co-dealer (codeal_dealing.HOLDERS; each pooled deck was announced so)."""


class Announcer(Protocol):
    async def announce(
        self, hand_id: str, deck: str, holder: int, holders: int
    ) -> tuple[bytes, bytes, bytes]: ...


async def take_live(
    link: Announcer,
    store: CodealStore,
    tenant: str,
    deck: str,
    now_ms: Callable[[], int],
    tries: int,
    held: Callable[[], None] = lambda: None,
) -> CodealRow | None:
    """The oldest pooled deck for ``tenant`` its co-dealer still deals, now the tenant's hand (not
    yet logged); None when the pool has none left (after ``tries`` decks tried)."""
    for _ in range(max(1, tries)):
        hand_id = await asyncio.to_thread(store.oldest_pooled, tenant, deck)
        if hand_id is None:
            return None
        try:
            await link.announce(hand_id, deck, 1, HOLDERS)
        except refusals.DealerError as e:
            if not ended_there(e):
                raise
            await asyncio.to_thread(store.drop_pooled, hand_id)
            log.warning(
                "co-dealt pooled deck %s of tenant %s was ended by its co-dealer (restored from backup, "
                "or its lifetime): dropped, never a hand; another taken for the open",
                hand_id,
                tenant,
            )
            continue
        held()  # raises while this process may not deal: nothing taken
        row = await asyncio.to_thread(store.take, tenant, deck, now_ms(), hand_id)
        if row is not None:
            return row
    return None
