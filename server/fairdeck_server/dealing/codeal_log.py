"""The co-dealt hands' entries in the dealer's transparency log (docs/codealing-spec.md section 11).

A hand's setup entry and its K shuffle entries (holder order) are appended when the hand opens,
before its id is answered, so before any card is dealt; one shares entry per dealt position (in
position order), one seals entry per co-dealer (holder order; none for a row closed without
``public["seals"]``) and the seeds entry when it closes. ``CodealLog.append`` goes through the
dealer's Storage as commit and reveal entries do (``create_batch`` of a batch with no hands: group-committed,
on disk before it returns, on SQLite and PostgreSQL), after the reaper's ``before_logging``. What the
co-dealt row records of it (``public["log"]``: the first index of each step) says which steps are
logged: a hand whose opening is not logged has it logged before its first card (or with its
closing), a closed hand whose closing is not logged gets it on its next CloseHand
(docs/codealing-spec.md section 11, "When, exactly").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fairdeck.codeal.entries import SEALS, SEEDS, SETUP, SHARES, SHUFFLE, CodealEntry
from fairdeck_server.dealing.codeal_store import CodealRow
from fairdeck_server.storage.base import HandBatch

if TYPE_CHECKING:
    from fairdeck_server.dealing.dealer import Dealer

OPENED, CLOSED = "open", "close"
"""The steps ``public["log"]`` names: the log index of each one's first entry."""
SEALS_STEP, SEEDS_STEP = "seals", "seeds"
"""Also in ``public["log"]`` once the closing is logged: the seals entries' indexes (co-dealer order)
and the seeds entry's (the receipts of docs/codealing-spec.md section 11.1)."""


class CodealLog:
    """Appends co-dealt entries to the log of ``dealer`` (its Storage, after its before_logging)."""

    def __init__(self, dealer: Dealer) -> None:
        self.dealer = dealer

    async def append(self, tenant: str, entries: Sequence[bytes]) -> int:
        """Append ``entries`` in order, durably; the log index of the first."""
        await self.dealer.before_logging()
        return await self.dealer.storage.create_batch(HandBatch.of_entries(tenant, list(entries)))

    async def opened(self, row: CodealRow, now_ms: int) -> None:
        """Log the hand's setup and shuffle entries, and note it in ``row`` (not stored here)."""
        first = await self.append(row.tenant, opening_entries(row, now_ms))
        row.public.setdefault("log", {})[OPENED] = first

    async def closed(self, row: CodealRow, now_ms: int) -> None:
        """Log the hand's shares and seeds entries, and note it in ``row`` (not stored here); its
        setup and shuffles first if they are not logged (a hand opened before co-dealt logging)."""
        opening = [] if logged(row, OPENED) else opening_entries(row, now_ms)
        closing = closing_entries(row, now_ms)
        first = await self.append(row.tenant, [*opening, *closing])
        steps = row.public.setdefault("log", {})
        if opening:
            steps[OPENED] = first
        steps[CLOSED] = first + len(opening)
        # The seals and seeds entries' own indexes, for a format-5 hand proof's receipts (the
        # Hand's codeal.log_indexes): the closing is shares, seals (one per co-dealer), seeds.
        seeds = first + len(opening) + len(closing) - 1
        steps[SEALS_STEP] = list(range(seeds - len(row.public.get("seals", [])), seeds))
        steps[SEEDS_STEP] = seeds


def logged(row: CodealRow, step: str) -> bool:
    """Whether ``row`` records ``step`` (OPENED, CLOSED) as logged."""
    return step in row.public.get("log", {})


def opening_entries(row: CodealRow, now_ms: int) -> list[bytes]:
    """The setup entry, then one shuffle entry per key holder, in holder order."""
    keys = tuple(bytes.fromhex(k) for k in row.public["keys"])
    setup = CodealEntry(SETUP, now_ms, row.hand_id, row.deck, keys).encode()
    shuffles = [
        CodealEntry(SHUFFLE, now_ms, row.hand_id, records=(bytes.fromhex(s),)).encode()
        for s in row.public["shuffles"]
    ]
    return [setup, *shuffles]


def closing_entries(row: CodealRow, now_ms: int) -> list[bytes]:
    """One shares entry per dealt position, in position order, one seals entry per co-dealer, then
    the seeds entry."""
    hand_id = row.hand_id
    dealt = sorted(row.public["dealt"], key=lambda d: int(d["position"]))
    shares = [
        CodealEntry(SHARES, now_ms, hand_id, records=_hex(d["shares"]), position=d["position"]).encode()
        for d in dealt
    ]
    seals = [
        CodealEntry(SEALS, now_ms, hand_id, records=_seals(statements), position=k).encode()
        for k, statements in enumerate(row.public.get("seals", []), start=1)
    ]
    seeds = CodealEntry(SEEDS, now_ms, hand_id, records=_hex(row.public["seeds"])).encode()
    return [*shares, *seals, seeds]


def _hex(values: Sequence[str]) -> tuple[bytes, ...]:
    return tuple(bytes.fromhex(v) for v in values)


def _seals(statements: Sequence[dict[str, object]]) -> tuple[bytes, ...]:
    """u32(p) || seat_pk || SHA-256(sealed) || signature of each statement, as the row keeps them."""
    return tuple(
        int(str(s["position"])).to_bytes(4, "big")
        + bytes.fromhex(str(s["seat_key"]))
        + bytes.fromhex(str(s["sealed_sha256"]))
        + bytes.fromhex(str(s["signature"]))
        for s in statements
    )
