"""Voiding stale hands in batches, each void charged to the tenant that opened the hand.

``void_before`` voids up to ``limit`` hands not closed that were created before a time, oldest
first: grouped by tenant into slices of VOID_SLICE hands, each slice one ``Storage.update_hands``
(one storage operation in its tenant's turns at the writer, fair.py), all handed to storage at
once, so that a writer commits many voids per transaction while every other tenant's work keeps
its turns. It says how far it got: every hand created before ``Progress.closed_before_ms`` is
closed, voided or skipped (the reaper's watermark, reaper.py). A hand that cannot be voided (a
DealerError other than STORAGE_UNAVAILABLE: its seed does not open, its row cannot be read) is
skipped, remembered in ``skipped`` and reported once through ``on_skip``; the others are voided
all the same. Storage failing raises, once every slice handed over has ended. ``Voider`` is
that for one Storage and its hands' ``Decks``: what the reaper drives, apart from the dealer. No grpc.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fairdeck.log.logentry import VOIDED
from fairdeck_server import fair, refusals
from fairdeck_server.dealing.stored_decks import Decks
from fairdeck_server.storage.base import Change, HandRecord, Storage

VOID_SLICE = 16
"""Hands per storage operation, as a DealHands slice while tenants share (bulk.SHARED_SLICE):
one item of its tenant's turns, heavier than a call's one hand, so another tenant's call is not
written behind it (fair.take_turns)."""

Decide = Callable[[HandRecord], tuple[Change, Any]]


@dataclass(frozen=True)
class Progress:
    handled: int
    """Hands voided, or skipped for the first time."""
    closed_before_ms: int
    """Every hand created before this time is closed, voided or skipped."""


async def void_before(
    storage: Storage,
    cutoff_ms: int,
    revealing: Callable[[], Decide],
    *,
    limit: int,
    skipped: set[tuple[str, str]],
    on_skip: Callable[[str, str, str], None],
) -> Progress:
    """Void up to ``limit`` hands created before ``cutoff_ms``, oldest first. ``revealing()``
    gives the decide function of a void decided now (its time), called once per slice. Skipped
    hands come first in every query, so they are asked for on top of ``limit``."""
    asked = limit + len(skipped)
    stale = await storage.stale_hands(cutoff_ms, asked)
    todo: dict[str, list[str]] = {}
    handled = 0
    left_ms: int | None = None
    """The creation time of the first hand read and not handled now (past ``limit``)."""
    for tenant, hand_id, created_ms in stale:
        if (tenant, hand_id) in skipped:
            continue
        if handled == limit:
            left_ms = created_ms
            break
        handled += 1
        todo.setdefault(tenant, []).append(hand_id)
    slices = [(t, ids[i : i + VOID_SLICE]) for t, ids in todo.items() for i in range(0, len(ids), VOID_SLICE)]
    outcomes = await asyncio.gather(
        *(_void(storage, tenant, ids, revealing) for tenant, ids in slices), return_exceptions=True
    )
    failure: BaseException | None = None
    for (tenant, ids), outcome in zip(slices, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            failure = failure or outcome
            continue
        for hand_id, result in zip(ids, outcome, strict=True):
            if not isinstance(result, refusals.DealerError):
                continue
            if result.status is refusals.Status.UNAVAILABLE:  # not the hand's fault
                failure = failure or result
                continue
            skipped.add((tenant, hand_id))
            on_skip(tenant, hand_id, result.reason)
    if failure is not None:
        raise failure
    if left_ms is not None:
        return Progress(handled, left_ms)
    if len(stale) == asked:  # more may follow, none created before the last one read
        return Progress(handled, stale[-1][2])
    return Progress(handled, cutoff_ms)


async def _void(
    storage: Storage, tenant: str, hand_ids: list[str], revealing: Callable[[], Decide]
) -> list[HandRecord | refusals.DealerError]:
    """One slice, as work of the tenant that opened its hands."""
    token = fair.bind(tenant)
    try:
        return await storage.update_hands(tenant, hand_ids, revealing())
    finally:
        fair.unbind(token)


def _no_skip(tenant: str, hand_id: str, reason: str) -> None:
    return None


class Voider:
    """Voids the stale hands of ``storage``, whose decks ``decks`` opens, at ``clock_ms``'s time;
    remembers the hands it could not void for its own life (a restart, e.g. with the missing key
    loaded, tries them again)."""

    def __init__(self, storage: Storage, decks: Decks, clock_ms: Callable[[], int]) -> None:
        self.storage = storage
        self.decks = decks
        self._clock_ms = clock_ms
        self.skipped: set[tuple[str, str]] = set()
        """(tenant, hand_id) of stale hands that could not be voided (see ``void_before``)."""

    async def void_before(
        self, cutoff_ms: int, limit: int = 1000, on_skip: Callable[[str, str, str], None] = _no_skip
    ) -> Progress:
        """Void up to ``limit`` hands created before ``cutoff_ms``, in batches (``void_before``
        above), each decided at the time of its slice."""
        return await void_before(
            self.storage,
            cutoff_ms,
            lambda: self.decks.revealing(VOIDED, self._clock_ms()),
            limit=limit,
            skipped=self.skipped,
            on_skip=on_skip,
        )
