"""Health's probe write is the dealer's own work (fair.SYSTEM) in the storage writer's turns,
not the work of the tenant whose failed call started it: charged to that tenant, it waited
behind that tenant's whole backlog while health went on saying what it said before."""

from __future__ import annotations

import asyncio

from fairdeck_server import fair
from fairdeck_server.observe.storage_health import StorageHealth
from tests.support.waits import wait_for_async


def test_the_probe_runs_as_the_dealers_own_work() -> None:
    whose: list[str] = []

    async def probe() -> None:
        whose.append(fair.current())

    async def main() -> None:
        health = StorageHealth(probe, lambda healthy: None)
        token = fair.bind("bulk-tenant")  # the call that failed
        health.failed()
        fair.unbind(token)
        await wait_for_async("the probe to run", lambda: whose)
        await health.stop()

    asyncio.run(main())
    assert whose == [fair.SYSTEM]
