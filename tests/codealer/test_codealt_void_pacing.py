"""Co-dealt voids are work tenants leave to the dealer: each takes a slot of the dealer's fair
admission in its tenant's turns (``Admission.enter_work``), as ordinary voids take turns at the
storage writer, so a backlog of them never crowds out live calls nor runs beyond the slots. The
real co-dealer and dealer code in process over real SQLite files, on an injected clock."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

from fairdeck_server import fair
from fairdeck_server.dealing.codeal_dealing import CodealDealer
from fairdeck_server.dealing.codeal_store import CodealRow
from fairdeck_server.dealing.codeal_voids import CodealReaper
from tests.support.codeal_pool import in_process

LIFETIME_S = 4
ABANDONED = 8
"""Co-dealt hands a tenant that went away left open."""
WORKERS, CALLS = 2, 12
"""A live tenant's calls: ``WORKERS`` at once (its --max-calls-in-flight), ``CALLS`` each."""
SLOTS = 2


def test_codealt_voids_ran_outside_the_fair_admission_now_take_slots_in_their_tenants_turn(
    tmp_path: Path,
) -> None:
    """A wave of co-dealt voids while a live tenant keeps calling: the voids ran beside the
    admission's slots (one more piece of work at once than the slots allow, its CPU unaccounted);
    now each takes a slot in its tenant's turns. Every live call is admitted (none refused), none
    waits for more than one void, work at once never passes the slots, and every hand is voided."""
    now = [1_700_000_000_000]
    _, dealer, storage = in_process(tmp_path, now, 8000)  # the orphan tests' co-dealer lifetime
    admission = fair.Admission(SLOTS, WORKERS)
    reaper = CodealReaper(dealer, LIFETIME_S, lambda: now[0], admission=admission)
    at_work, peak, voids_begun = [0], [0], [0]
    waited: list[int] = []
    refused: list[int] = []
    real_close = dealer.close

    def begin() -> None:
        at_work[0] += 1
        peak[0] = max(peak[0], at_work[0])

    async def close(
        tenant: str, hand_id: str, *, voided: bool = False, releases: Sequence[bytes] = ()
    ) -> CodealRow:
        voids_begun[0] += 1
        begin()
        try:
            return await real_close(tenant, hand_id, voided=voided, releases=releases)
        finally:
            at_work[0] -= 1

    dealer.close = close  # type: ignore[method-assign]

    async def live_call() -> None:
        asked = voids_begun[0]
        if not await admission.enter("live"):
            refused.append(1)
            return
        waited.append(voids_begun[0] - asked)
        begin()
        try:  # a call's own work, off the loop (its slot held meanwhile)
            await asyncio.to_thread(hashlib.sha256, bytes(1 << 20))
        finally:
            at_work[0] -= 1
            admission.leave("live")

    voiding = asyncio.Event()

    async def live() -> None:
        """Calls back to back all through the wave of voids (``CALLS`` at least)."""
        made = 0
        while made < CALLS or not voiding.is_set():
            await live_call()
            made += 1

    async def wave() -> None:
        try:
            await reaper.round()
        finally:
            voiding.set()

    async def scene() -> int:
        await storage.start()
        for _ in range(ABANDONED):
            await _abandon(dealer)
        now[0] += LIFETIME_S * 1000
        await asyncio.gather(wave(), *(live() for _ in range(WORKERS)))
        await dealer.aclose()
        await storage.close()
        return reaper.voided

    voided = asyncio.run(scene())
    assert voided == ABANDONED
    assert not refused and len(waited) >= WORKERS * CALLS
    assert max(waited) <= 1, waited  # promptly: one void at most before each live call
    assert peak[0] <= SLOTS, peak[0]


async def _abandon(dealer: CodealDealer) -> None:
    hand_id = (await dealer.open_hand("gone", "short")).hand_id
    await dealer.draw("gone", hand_id, 2, b"")
