"""DealHands, the bulk pipeline (``BulkDealing``): up to MAX_BATCH_HANDS new hands in one call,
built in slices that each wait their tenant's turn of the CPU (fair.CpuTurns) and stored one
storage operation a slice, yielded in chunks of BATCH_CHUNK once every hand in them is durable.

Its dealer (dealer.py) checks the request and gives it its entropy, clock, hand ids, vault and
``before_logging`` (the reaper's); while other tenants call (``others_call``) slices are smaller
and rest after their write (REST). No grpc; ``hands_held`` is what a call holds against its
tenant's open-hands cap, for the edge's limits.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from fairdeck.core.commitment import committer
from fairdeck.core.derivation import Plan
from fairdeck.log.logentry import CLOSED, commit_entries, deck_digest, reveal_entries
from fairdeck_server import fair
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.base import HandBatch, Storage

MAX_BATCH_HANDS = 100_000
"""DealHands: at most this many hands per call."""
BATCH_CHUNK = 256
"""DealHands: hands per streamed message, each sent once all its hands are durable."""
SLICE, SHARED_SLICE = 32, 16
"""DealHands: hands built in one turn of the CPU (fair.CpuTurns) and stored by one storage
operation, which takes its tenant's turn at the writer; SHARED_SLICE while tenants share (the bulk
batch another tenant's call waits for: docs/scaling.md, "Sizes")."""
REST = 0.5
"""While tenants share the dealer, a DealHands slice keeps the CPU's turn until it is written
and then for this many times as long again, at most MAX_REST seconds (a write that stalled is no
reason to wait longer): one slice of anyone's at a time, and the process's interpreter lock left
free a third of the time (docs/scaling.md, "Bulk work while others call")."""
MAX_REST = 0.05
STREAM_IN_FLIGHT = 2 * BATCH_CHUNK
"""Hands a DealHands call with ``close`` holds against the open-hands cap while it runs:
the chunk being written and the next one being stored (``BulkDealing.deal``)."""


def hands_held(hand_count: int | None = None, *, close: bool = False) -> int:
    """How many hands an opening call holds against its tenant's open-hands cap while it runs:
    one for OpenHand and DealNewHand (``hand_count`` None); ``hand_count`` for DealHands.

    With ``close`` a DealHands call's hands are closed when stored, but while it runs they are
    work in flight: it holds up to STREAM_IN_FLIGHT, so a tenant cannot run more such streams
    at once than its cap allows (each makes the dealer produce hands until the client's
    flow-control window is full, read or not). A count out of range, refused anyway, holds none.

    >>> hands_held(), hands_held(100_000), hands_held(100_000, close=True), hands_held(0)
    (1, 100000, 512, 0)
    """
    if hand_count is None:
        return 1
    if not 1 <= hand_count <= MAX_BATCH_HANDS:
        return 0
    return min(hand_count, STREAM_IN_FLIGHT) if close else hand_count


@dataclass(frozen=True)
class DealtSlice:
    """A slice of a DealHands call, stored: its hands, their decks, and the log index of its
    first entry (hand ``i``'s commit entry is at ``first_index + i * batch.step``)."""

    batch: HandBatch
    cards: list[tuple[int, ...]]
    first_index: int


class BulkDealing:
    """The DealHands calls of one dealer, each built and stored in fair turns."""

    def __init__(
        self,
        storage: Storage,
        vault: SeedVault,
        *,
        entropy: Callable[[int], bytes],
        clock_ms: Callable[[], int],
        new_hand_ids: Callable[[int], list[str]],
        version: str,
        before_logging: Callable[[], Awaitable[None]],
        others_call: Callable[[str], bool],
    ) -> None:
        self.storage = storage
        self.vault = vault
        self._entropy = entropy
        self._clock_ms = clock_ms
        self._new_hand_ids = new_hand_ids
        self._version = version
        self.before_logging = before_logging
        self.others_call = others_call
        self._committers: dict[str, Callable[[str, bytes], bytes]] = {}
        self.turns = fair.CpuTurns(SLICE)
        """Whose turn it is to use the CPU for bulk work (DealHands slices)."""

    async def deal(
        self, tenant: str, p: Plan, count: int, seeds: tuple[bytes, ...], closed: bool
    ) -> AsyncIterator[list[DealtSlice]]:
        """``count`` new hands of ``p`` in chunks of BATCH_CHUNK: chunk k+1 is built, slice by slice
        in fair turns, while chunk k's slices are stored; chunk k is yielded once all of its slices
        are durable."""
        stores: list[asyncio.Future[int]] = []  # every slice handed to storage, in order
        done = 0
        in_flight: list[tuple[HandBatch, list[tuple[int, ...]], asyncio.Future[int]]] | None = None
        try:
            while done < count or in_flight is not None:
                ahead = None
                if done < count:
                    await self.before_logging()
                    n = min(BATCH_CHUNK, count - done)
                    ahead = await self._build_chunk(tenant, p, n, seeds, closed, stores)
                    done += n
                if in_flight is not None:
                    chunk, in_flight = in_flight, ahead
                    yield [DealtSlice(batch, cards, await stored) for batch, cards, stored in chunk]
                in_flight = ahead
        finally:
            # The caller went away or a slice failed: the slices already handed to storage still
            # become durable (their hands are voided in time), so wait for them and keep their
            # outcomes out of asyncio's "never retrieved" log.
            waiting = [f for f in stores if not f.done()]
            if waiting:
                await asyncio.gather(*waiting, return_exceptions=True)
            for f in stores:
                if f.done() and not f.cancelled():
                    f.exception()  # retrieved

    async def _build_chunk(
        self,
        tenant: str,
        p: Plan,
        n: int,
        seeds: tuple[bytes, ...],
        closed: bool,
        stores: list[asyncio.Future[int]],
    ) -> list[tuple[HandBatch, list[tuple[int, ...]], asyncio.Future[int]]]:
        """``n`` hands in slices, each built in its tenant's turn of the CPU and handed to storage
        at once; one call for the whole chunk's seeds."""
        size = p.seed_bytes
        entropy = self._entropy(size * n)
        out: list[tuple[HandBatch, list[tuple[int, ...]], asyncio.Future[int]]] = []
        step = SHARED_SLICE if self.others_call(tenant) else SLICE  # sharing, as of this chunk
        for start in range(0, n, step):
            m = min(step, n - start)
            raw = entropy[start * size : (start + m) * size]
            batch, cards = await self.turns.run(
                m,
                functools.partial(self._build_slice, tenant, p, m, raw, seeds, closed),
                then=functools.partial(self._store_slice, tenant, stores),
            )
            out.append((batch, cards, stores[-1]))
        return out

    async def _store_slice(
        self, tenant: str, stores: list[asyncio.Future[int]], built: tuple[HandBatch, list[tuple[int, ...]]]
    ) -> None:
        """Hand a slice to storage (its future joins ``stores``); while tenants share, return only
        once it is written and then after a rest (REST), the CPU's turn held all along."""
        stored = asyncio.ensure_future(self.storage.create_batch(built[0]))
        stores.append(stored)
        if self.others_call(tenant):
            await asyncio.wait([stored])
            await asyncio.sleep(min(MAX_REST, (time.perf_counter() - self.turns.began) * REST))

    def _build_slice(
        self, tenant: str, p: Plan, n: int, raw: bytes, seeds: tuple[bytes, ...], closed: bool
    ) -> tuple[HandBatch, list[tuple[int, ...]]]:
        """``n`` new hands from ``raw`` (their seeds, end to end): ids, commitments, decks, log
        entries and, for hands that stay open, sealed seeds; the shared fields once."""
        size = p.seed_bytes
        now = self._clock_ms()
        ids = self._new_hand_ids(n)
        server = [raw[i * size : (i + 1) * size] for i in range(n)]
        commit_one = self._committer(p.spec.name)
        commitments = [commit_one(h, s) for h, s in zip(ids, server, strict=True)]
        derive = p.derive
        cards = [derive(h, s, seeds) for h, s in zip(ids, server, strict=True)]
        entries = commit_entries(now, ids, self._version, p.spec.name, commitments)
        if closed:
            reveals = reveal_entries(now, ids, CLOSED, server, seeds, [deck_digest(c) for c in cards])
            entries = [e for pair in zip(entries, reveals, strict=True) for e in pair]
            sealed = [b""] * n  # revealed at once: the seed is in the row and the log
        else:
            sealed = self.vault.seal_many(ids, server)
        batch = HandBatch(
            tenant=tenant,
            deck=p.spec.name,
            version=self._version,
            client_seeds=seeds,
            closed=closed,
            dealt=p.spec.size,
            created_ms=now,
            hand_ids=ids,
            commitments=commitments,
            sealed_seeds=sealed,
            server_seeds=server if closed else None,
            entries=entries,
        )
        return batch, cards

    def _committer(self, deck: str) -> Callable[[str, bytes], bytes]:
        found = self._committers.get(deck)
        if found is None:
            found = self._committers[deck] = committer(deck, version=self._version)
        return found
