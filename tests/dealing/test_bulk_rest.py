"""DealHands while other tenants call (bulk.REST): one slice of anyone's at a time, of
SHARED_SLICE hands, its CPU turn held until the slice is written and then for REST times as long
again, so that the process's interpreter lock is left free part of the time for the others' calls.
A tenant alone keeps the pipeline (chunk k+1 built while chunk k is written) and SLICE hands. The
real dealer core on real SQLite; the storage's create_batch and the dealer's slice builder are only
watched."""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from fairdeck_server.dealing import bulk
from fairdeck_server.dealing.dealer import Dealer
from fairdeck_server.dealing.vault import SeedVault
from fairdeck_server.storage.sqlite import SqliteStorage
from tests.support.waits import hold_silent_async


async def _deal_watched(
    tmp_path: Path, shared: bool, stall: float = 0.0, sizes: list[int] | None = None
) -> list[tuple[str, float, float]]:
    """Two tenants' DealHands(96) at once: (what, began, ended) of every slice's build and write;
    each write's number of hands goes in ``sizes``."""
    storage = SqliteStorage(tmp_path / "fairdeck.db")
    await storage.start()
    dealer = Dealer(storage, SeedVault(secrets.token_bytes(32)), others_call=lambda tenant: shared)
    events: list[tuple[str, float, float]] = []
    build, create = dealer.bulk._build_slice, storage.create_batch

    def watched_build(*args: Any) -> Any:
        began = time.perf_counter()
        try:
            return build(*args)
        finally:
            events.append(("build", began, time.perf_counter()))

    async def watched_create(batch: Any) -> Any:
        began = time.perf_counter()
        try:
            if sizes is not None:
                sizes.append(len(batch.hand_ids))
            await hold_silent_async(stall)  # a write that stalls (a slow disk)
            return await create(batch)
        finally:
            events.append(("write", began, time.perf_counter()))

    dealer.bulk._build_slice = watched_build  # type: ignore[method-assign]
    storage.create_batch = watched_create  # type: ignore[method-assign]
    try:

        async def deal(tenant: str) -> int:
            chunks = [c async for c in await dealer.deal_hands(tenant, "standard", 96, [], True)]
            return sum(len(c) for c in chunks)

        slices = 96 // (bulk.SHARED_SLICE if shared else bulk.SLICE)
        assert await asyncio.gather(deal("a"), deal("b")) == [slices, slices]  # in one chunk each
    finally:
        await storage.close()
    return sorted(events, key=lambda e: e[1])


def test_while_tenants_share_one_slice_at_a_time_is_built_written_and_rested(tmp_path: Path) -> None:
    sizes: list[int] = []
    events = asyncio.run(_deal_watched(tmp_path, shared=True, sizes=sizes))
    builds = [e for e in events if e[0] == "build"]
    writes = [e for e in events if e[0] == "write"]
    assert sizes == [bulk.SHARED_SLICE] * 12, "slices while others call are not SHARED_SLICE"
    assert len(builds) == len(writes) == 12
    for (_, began, _), (_, _, written), (_, next_began, _) in zip(builds, writes, builds[1:], strict=False):
        assert next_began >= written, "a slice was built while another was being written"
        # Its rest: REST times the slice's build and write, at most MAX_REST (timer slack aside).
        assert next_began - written >= min((written - began) * bulk.REST, bulk.MAX_REST) * 0.9


def test_a_tenant_alone_keeps_building_while_its_slices_are_written(tmp_path: Path) -> None:
    sizes: list[int] = []
    events = asyncio.run(_deal_watched(tmp_path, shared=False, sizes=sizes))
    assert sizes == [bulk.SLICE] * 6
    builds = [e for e in events if e[0] == "build"]
    writes = [e for e in events if e[0] == "write"]
    # Each slice is handed to storage as soon as it is built, and the next is built at once.
    overlapping = sum(1 for _, began, _ in builds[1:] if any(w[1] <= began < w[2] for w in writes))
    assert overlapping >= 1


@pytest.mark.light
def test_a_stalled_write_is_not_followed_by_a_rest_as_long(tmp_path: Path) -> None:
    events = asyncio.run(_deal_watched(tmp_path, shared=True, stall=0.4))
    builds = [e for e in events if e[0] == "build"]
    writes = [e for e in events if e[0] == "write"]
    for (_, _, written), (_, next_began, _) in zip(writes, builds[1:], strict=False):
        assert written <= next_began < written + bulk.MAX_REST + 0.1  # not 0.2 s after
