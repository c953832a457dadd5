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
from tests.support.floods import Flood, check_latency, grpcurl_session, reflection_flood, watch_flood
from tests.support.speed import scaled
from tests.support.waits import wait_for_async

pytestmark = pytest.mark.serial  # holds time or CPU to a bar: runs alone in a parallel run

REFLECTION_STREAMS, REFLECTION_CONNECTIONS = 300, 6
BASELINE_STREAMS = 60
"""The baseline's flood: as many connections, a fifth of the streams waiting."""
WATCH_STREAMS, WATCH_CONNECTIONS = 600, 12
"""50 streams a connection: max_streams_per_connection, so that none waits in its client (a
connection whose 50 are held open has its other calls wait there until one ends)."""
MEASURED_ANSWERS = 250
"""Answers a CPU figure is taken over: 5 s or so, long enough for the dealer's periodic work
(checkpoints, the reaper) to fall into each window alike."""
HELD_WATCHES = 100 + WATCH_CONNECTIONS
"""max_open_streams_per_peer, plus each connection's first: more than the reflection flood holds
(its streams count in the same limit), so the Watch flood is refused whatever the order."""


def test_floods_with_no_tenant_wait_behind_themselves(run: FaultRun) -> None:
    dealer = run.start()
    run.ledger.deal(dealer.target, 2)  # the tenant, before

    async def answers_cost(flood: Flood, count: int = 100) -> tuple[int, float]:
        """The flood's next ``count`` answers or so, and the dealer's CPU milliseconds per answer."""
        cpu, answers = dealer.cpu_seconds() or 0.0, flood.answers
        await wait_for_async(  # about 2 s a hundred, at 50 answers a second
            f"{count} answers to the flood", lambda: flood.answers - answers >= count, timeout=60
        )
        cpu, answers = (dealer.cpu_seconds() or 0.0) - cpu, flood.answers - answers
        return answers, 1000 * cpu / max(answers, 1)

    async def scenario() -> dict[str, float]:
        few = await reflection_flood(dealer.target, BASELINE_STREAMS, REFLECTION_CONNECTIONS)
        try:  # the baseline, side by side: a fifth of the flood, paced as it is
            await answers_cost(few)
            _, alone = await answers_cost(few, MEASURED_ANSWERS)
        finally:
            await few.close()
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
            await answers_cost(reflection)  # past the Watch flood's refusals, as the baseline's first
            answers, per_answer = await answers_cost(reflection, MEASURED_ANSWERS)
            await asyncio.to_thread(run.ledger.deal, dealer.target, 20)  # the tenant, during
            return {
                "session": await grpcurl_session(dealer.target, 10, timeout=15),
                "check": await check_latency(dealer.target, timeout=5),
                "answers": answers,
                "cpu_ms_per_answer": per_answer,
                "cpu_ms_per_answer_alone": alone,
            }
        finally:
            await reflection.close()
            await watches.close()

    seen = asyncio.run(scenario())
    assert run.ledger.failures == 0 and len(run.ledger.closed) == 22
    assert seen["session"] < 15 and seen["check"] < scaled(1.0, under=4.0), seen  # its timeout: 5 s
    # Waiting is free: as much dealer CPU an answer with 300 streams waiting as with 60. Polling
    # costs in proportion to the streams waiting (it took 3-9 ms an answer with 300, where free
    # waiting takes 0.8-1.7 on a loaded 2-core VM). Against the same dealer's baseline, not a
    # figure: on an idle machine an answer costs 2.5-4.3 ms (fewer answers a wake-up), which
    # failed a fixed 3 ms bar. The ratio was 0.9x-1.2x in runs alone on an idle machine.
    # Each figure is over MEASURED_ANSWERS answers (5 s or so): over 100 (2 s) one window caught
    # the dealer's own periodic work and the other did not, and a CI run saw 0.69 ms alone, 3.7x.
    assert seen["answers"] >= MEASURED_ANSWERS, seen
    assert seen["cpu_ms_per_answer"] < 2.5 * seen["cpu_ms_per_answer_alone"], seen
    run.ledger.deal(dealer.target, 2)  # the tenant, after
