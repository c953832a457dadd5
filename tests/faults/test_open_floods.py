"""Work with no tenant: floods of the methods open to all (reflection, health Watch), from one
client address with no credentials, while a tenant deals. Their work is charged to the address
and its connections, so the flood waits behind itself: the tenant's calls, health Check and a
grpcurl session keep their turns, the flood's waiting costs the dealer no CPU, and its streams
past the address's limit are refused at once.
(Before: 1,500 waiting reflection streams took a core and a Check timed out at 4,000; 20,000
Watch streams took 458 MiB and kept half of it.)
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.faults import FaultRun
from tests.support.floods import check_latency, grpcurl_session, reflection_flood, watch_flood
from tests.support.waits import wait_for_async

pytestmark = pytest.mark.serial  # holds time or CPU to a bar: runs alone in a parallel run

REFLECTION_STREAMS, REFLECTION_CONNECTIONS = 300, 6
WATCH_STREAMS, WATCH_CONNECTIONS = 600, 12
"""50 streams a connection: max_streams_per_connection, so that none waits in its client (a
connection whose 50 are held open has its other calls wait there until one ends)."""
HELD_WATCHES = 100 + WATCH_CONNECTIONS
"""max_open_streams_per_peer, plus each connection's first: more than the reflection flood holds
(its streams count in the same limit), so the Watch flood is refused whatever the order."""


def test_floods_with_no_tenant_wait_behind_themselves(run: FaultRun) -> None:
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)  # the tenant, before

    async def scenario() -> dict[str, float]:
        reflection = await reflection_flood(dealer.target, REFLECTION_STREAMS, REFLECTION_CONNECTIONS)
        watches = await watch_flood(dealer.target, WATCH_STREAMS, WATCH_CONNECTIONS)
        try:
            await wait_for_async(
                "every stream answered or ended",
                lambda: (
                    reflection.answered + sum(reflection.ended.values()) >= REFLECTION_STREAMS
                    and watches.answered + sum(watches.ended.values()) >= WATCH_STREAMS
                ),
                timeout=30,
            )
            assert watches.answered <= HELD_WATCHES and set(watches.ended) == {"RESOURCE_EXHAUSTED"}
            # A refusal that crosses the client's own write is read INTERNAL by gRPC Python's client.
            assert set(reflection.ended) <= {"RESOURCE_EXHAUSTED", "INTERNAL"}, reflection.ended
            cpu, answers = dealer.cpu_seconds() or 0.0, reflection.answers
            await wait_for_async(  # about 2 s of the flood alone, at 50 answers a second
                "100 answers to the flood alone", lambda: reflection.answers - answers >= 100, timeout=60
            )
            cpu, answers = (dealer.cpu_seconds() or 0.0) - cpu, reflection.answers - answers
            await asyncio.to_thread(run.ledger.deal, dealer.target, 20)  # the tenant, during
            return {
                "session": await grpcurl_session(dealer.target, 10, timeout=15),
                "check": await check_latency(dealer.target, timeout=5),
                "answers": answers,
                "cpu_ms_per_answer": 1000 * cpu / max(answers, 1),
            }
        finally:
            await reflection.close()
            await watches.close()

    seen = asyncio.run(scenario())
    assert run.ledger.failures == 0 and len(run.ledger.closed) == 22
    assert seen["session"] < 15 and seen["check"] < 1.0, seen
    # Waiting is free: the dealer's CPU goes to the answers, 0.8-1.7 ms each on a loaded 2-core VM
    # (polling took 3-9 ms per answer with 300 waiting, and more with more).
    assert seen["answers"] >= 100 and seen["cpu_ms_per_answer"] < 3, seen
    run.ledger.deal(dealer.target, 2)  # the tenant, after
