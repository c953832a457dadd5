"""Work no tenant owns (open_work.py): the shared pace hands out turns address by address and,
within one, connection by connection, with one timer however many wait (reflection's 1,500
waiting streams polled the shared bucket every 20 ms or less: waiting took a core); the open
streams of an address are bounded, and a connection always gets its first."""

from __future__ import annotations

import asyncio

from fairdeck_server.policy.open_work import OpenStreams, SharedPace
from tests.support.waits import outlast_async, wait_for_async


async def _served(pace: SharedPace, who: list[tuple[str, str]]) -> tuple[list[int], list[asyncio.Task[None]]]:
    """Start a waiter for each (address, connection) in order; the indices served, in order."""
    order: list[int] = []

    async def one(i: int, address: str, connection: str) -> None:
        await pace.turn(address, connection)
        order.append(i)

    tasks = [asyncio.create_task(one(i, a, c)) for i, (a, c) in enumerate(who)]
    await asyncio.sleep(0)  # every one queued
    return order, tasks


def test_waiting_for_the_shared_pace_costs_one_wakeup_per_turn_however_many_wait() -> None:
    async def scenario() -> tuple[int, int]:
        pace = SharedPace(rate=200, burst=1)
        order, tasks = await _served(pace, [("a", f"a:{i % 4}") for i in range(300)])
        await outlast_async(0.5)  # the pace serves at its rate meanwhile
        served, wakeups = len(order), pace.wakeups
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return served, wakeups

    served, wakeups = asyncio.run(scenario())
    assert 30 <= served < 300  # at its rate: about 100 in half a second
    assert wakeups <= served + 2, f"{wakeups} wakeups for {served} turns: waiting polls"


def test_a_flood_of_one_address_waits_behind_itself() -> None:
    """200 waiting from one address, then one call of another: it is served next, not 200th."""

    async def scenario() -> list[int]:
        pace = SharedPace(rate=500, burst=1)
        order, flood = await _served(pace, [("flood", f"flood:{i % 16}") for i in range(200)])
        await wait_for_async("the flood served", lambda: order, every=0.005)
        late, tasks = await _served(pace, [("tool", "tool:1")])
        await wait_for_async("the late call served", lambda: late, every=0.005)
        position = len(order)
        for t in flood:
            t.cancel()
        await asyncio.gather(*flood, *tasks, return_exceptions=True)
        return [position]

    (position,) = asyncio.run(scenario())
    assert position < 30, f"the other address waited for {position} turns of the flood"


def test_a_new_connection_of_a_flooding_address_takes_turns_with_its_connections() -> None:
    """A tool behind the flood's address (a NAT, loopback) waits one round of its connections,
    not the whole backlog."""

    async def scenario() -> int:
        pace = SharedPace(rate=500, burst=1)
        order, flood = await _served(pace, [("same", f"same:{i % 8}") for i in range(200)])
        await wait_for_async("the flood served", lambda: order, every=0.005)
        before = len(order)
        late, tasks = await _served(pace, [("same", "same:tool")])
        await wait_for_async("the late call served", lambda: late, every=0.005)
        waited = len(order) - before
        for t in flood:
            t.cancel()
        await asyncio.gather(*flood, *tasks, return_exceptions=True)
        return waited

    assert asyncio.run(scenario()) <= 9 + 2


def test_a_cancelled_waiter_takes_no_turn() -> None:
    async def scenario() -> list[int]:
        pace = SharedPace(rate=100, burst=1)
        await pace.turn("a", "a:1")  # the burst spent
        order, tasks = await _served(pace, [("a", "a:1"), ("a", "a:1"), ("a", "a:1")])
        tasks[0].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert pace.wakeups <= 3
        return order

    assert asyncio.run(scenario()) == [1, 2]


def test_open_streams_bound_an_address_and_leave_each_connection_its_first() -> None:
    streams = OpenStreams(2)
    assert streams.enter("a", "a:1") and streams.enter("a", "a:1")
    assert not streams.enter("a", "a:1")  # the address is at its limit
    assert streams.enter("a", "a:2")  # a connection's first passes, once
    assert not streams.enter("a", "a:2")
    assert streams.enter("b", "b:1")  # another address is not touched
    streams.leave("a", "a:1")
    streams.leave("a", "a:1")
    assert streams.held("a") == 1
    assert streams.enter("a", "a:2")  # freed by the ones that ended
    for _ in range(2):
        streams.leave("a", "a:2")
    assert streams.held("a") == 0 and streams._by_connection == {"b:1": 1}


def test_no_limit_counts_nothing() -> None:
    streams = OpenStreams(0)
    assert all(streams.enter("a", "a:1") for _ in range(1000))
    assert streams.held("a") == 0
