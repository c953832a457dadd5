"""Taking a pooled co-dealt deck for a hand: only one its co-dealer still deals.

A deck waits in the pool (codeal.db) with no word from its co-dealer, which may have ended it
meanwhile: ``fairdeck codealer restored`` ends every hand its ledger holds open, pooled decks too,
and a co-dealer that lost its ledger knows none. Handed over as is, such a deck fails the tenant's
first draw (HAND_CLOSED). So each deck taken is first announced again to its co-dealer (a repeat
of the announce, answered from its ledger, no key made; refused HAND_CLOSED for an ended hand,
HAND_NOT_FOUND for one it does not know); a deck refused so was never a hand (nothing of it is
logged before this check) and is dropped from codeal.db, and the next one is taken, up to the
pool's size, then the caller makes one fresh. Any other refusal (the co-dealer down) is the open's.
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


class Announcer(Protocol):
    async def announce(
        self, hand_id: str, deck: str, holder: int, holders: int
    ) -> tuple[bytes, bytes, bytes]: ...


async def take_live(
    link: Announcer, store: CodealStore, tenant: str, deck: str, now_ms: Callable[[], int], tries: int
) -> CodealRow | None:
    """The oldest pooled deck for ``tenant`` its co-dealer still deals, now the tenant's hand (not
    yet logged); None when the pool has none (after ``tries`` dead ones dropped)."""
    for _ in range(max(1, tries)):
        row = await asyncio.to_thread(store.take, tenant, deck, now_ms())
        if row is None:
            return None
        try:
            await link.announce(row.hand_id, row.deck, 1, len(row.public["keys"]))
        except refusals.DealerError as e:
            if not ended_there(e):
                raise
            await asyncio.to_thread(store.drop_taken, row.hand_id)
            log.warning(
                "co-dealt pooled deck %s of tenant %s was ended by its co-dealer (restored from backup, "
                "or its lifetime): dropped, never a hand; another taken for the open",
                row.hand_id,
                tenant,
            )
            continue
        return row
    return None
