"""Fair turns between tenants (fair.py) and the per-tenant caps on calls in flight and streams.

The queue itself, then each place it orders work: admission (at most N calls at work, the rest
in their tenant's turn), the dealer's CPU work (slices of DealHands), and, on a real dealer
through the real SDK, the caps' refusals: RESOURCE_EXHAUSTED with a stable reason and a RetryInfo,
one tenant's cap never touching another's.
"""

from __future__ import annotations

import asyncio
import collections
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import ResourceExhausted
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck_server import fair
from tests.support.dealers import RunningDealer
from tests.support.ops import dealer_tokens, retry_delay
from tests.support.waits import wait_for

# -- the queue ------------------------------------------------------------------------------------


def test_a_tenant_with_nothing_queued_goes_before_the_next_turn_of_a_backlog() -> None:
    q: fair.FairQueue[str] = fair.FairQueue(quantum=4)
    for i in range(20):
        q.push("bulk", f"b{i}", 1)
    assert [q.pop() for _ in range(3)] == ["b0", "b1", "b2"]
    q.push("one", "o0", 1)
    # The backlog's turn under way ends (b3, its quantum of 4), then the newcomer, then the backlog.
    assert [q.pop() for _ in range(3)] == ["b3", "o0", "b4"]
    # Two backlogs take turns of one quantum each, by cost: a cost-4 item is a whole turn.
    q2: fair.FairQueue[str] = fair.FairQueue(quantum=4)
    for i in range(3):
        q2.push("a", f"a{i}", 4)
        q2.push("b", f"b{i}", 1)
    assert [q2.pop() for _ in range(6)] == ["a0", "b0", "b1", "b2", "a1", "a2"]
    assert q2.pop() is None and len(q2) == 0


def test_take_turns_gives_one_turn_each_to_several_tenants_and_more_to_one_alone() -> None:
    q: fair.FairQueue[str] = fair.FairQueue(quantum=32)
    for i in range(10):
        q.push("a", f"a{i}", 32)
    assert fair.take_turns(q, alone=128, most=512) == ["a0", "a1", "a2", "a3"]
    q.push("b", "b0", 1)
    # The newcomer's one hand is a batch of its own: it does not wait for a4's 32 to be written.
    assert fair.take_turns(q, alone=128, most=512) == ["b0"]
    assert fair.take_turns(q, alone=128, most=512) == ["a4", "a5", "a6", "a7"]
    # Light work of several tenants goes together; a slice after light work waits for the next batch.
    q.push("d", "d0", 1)
    q.push("e", "e0", 1)
    assert fair.take_turns(q, alone=128, most=512) == ["d0", "e0"]
    assert fair.take_turns(q, alone=128, most=512) == ["a8", "a9"]
    # A batch that begins with a slice holds one turn of each tenant, light or not.
    q2: fair.FairQueue[str] = fair.FairQueue(quantum=32)
    q2.push("c", "c0", 32)
    q2.push("b", "b0", 1)
    q2.push("c", "c1", 32)
    assert fair.take_turns(q2, alone=128, most=512) == ["c0", "b0"]
    assert fair.take_turns(q2, alone=128, most=512) == ["c1"]
    q.push("a", "a10", 32)
    q.push("a", "a11", 32)
    assert fair.take_turns(q, alone=1, most=512) == ["a10"]  # never nothing while work is queued


def test_sharing_is_two_tenants_within_the_window_the_dealers_own_work_aside() -> None:
    sharing = fair.Sharing(window=1.0)
    sharing.saw("bulk", 10.0)
    sharing.saw(fair.SYSTEM, 10.0)  # the reaper, checkpoints: nobody waits on them
    assert not sharing.shared(10.0)
    sharing.saw("table", 10.5)
    assert sharing.shared(10.6)
    sharing.saw("bulk", 11.3)
    assert sharing.shared(11.4)  # between the table's calls too
    sharing.saw("bulk", 11.6)
    assert not sharing.shared(11.6)  # the table's last work is a window ago: bulk is alone


def test_others_is_any_other_tenant_within_the_window() -> None:
    """What a long call (a DealHands stream, seen once as it began) asks: is anyone else calling?"""
    sharing = fair.Sharing(window=1.0)
    sharing.saw("bulk", 10.0)
    assert not sharing.others("bulk", 10.5)
    sharing.saw(fair.SYSTEM, 10.5)
    assert not sharing.others("bulk", 10.6)  # the dealer's own work is nobody's
    sharing.saw("table", 10.6)
    assert sharing.others("bulk", 11.5) and not sharing.shared(11.5)  # the stream began 1.5 s ago
    assert not sharing.others("bulk", 11.7)
    assert not sharing.others("table", 11.7)


def test_admission_without_slots_forgets_the_tenants_seen_long_ago() -> None:
    """With no cap on calls in flight (no slots) nothing asked ``shared``, so every tenant ever
    seen was kept, and the rate's pace asks ``others`` on every call: a pass over all of them."""
    clock = [100.0]
    admission = fair.Admission(0, 0, clock=lambda: clock[0])

    async def call(*tenants: str) -> None:
        for tenant in tenants:
            assert await admission.enter(tenant)
            admission.leave(tenant)

    asyncio.run(call(*(f"t{i}" for i in range(1000))))
    assert admission.others("acme")
    clock[0] += 2 * fair.SHARED_WINDOW
    asyncio.run(call("acme"))
    assert len(admission._sharing._seen) == 1
    assert not admission.others("acme") and admission.others("zenith")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", fair.SYSTEM]), st.floats(0, 1.5)), max_size=12))
def test_others_answers_as_a_pass_over_every_tenant_would(steps: list[tuple[str, float]]) -> None:
    sharing, now = fair.Sharing(window=1.0), 10.0
    seen: dict[str, float] = {}
    for whose, later in steps:
        now += later
        sharing.saw(whose, now)
        if whose != fair.SYSTEM:
            seen[whose] = now
        for asker in ("a", "b", "c"):
            for at in (now, now + 0.5, now + 1.0):
                expected = any(k != asker and at - t < 1.0 for k, t in seen.items())
                assert sharing.others(asker, at) == expected


def test_push_front_puts_work_back_first_in_its_tenants_queue() -> None:
    q: fair.FairQueue[str] = fair.FairQueue(quantum=1)
    q.push("a", "a1")
    q.push("a", "a2")
    q.push_front("a", "a0")
    assert [q.pop(), q.pop(), q.pop(), q.pop()] == ["a0", "a1", "a2", None]


# -- admission and the CPU's turns -----------------------------------------------------------------


def test_admission_hands_a_free_slot_to_the_tenant_whose_turn_it_is() -> None:
    async def scenario() -> list[str]:
        gate = fair.Admission(slots=1, per_tenant=3)
        order: list[str] = []

        async def call(tenant: str, name: str, hold: asyncio.Event) -> None:
            assert await gate.enter(tenant)
            order.append(name)
            await hold.wait()
            gate.leave(tenant)

        release = asyncio.Event()
        release.set()
        first = asyncio.Event()
        tasks = [asyncio.create_task(call("busy", "busy-0", first))]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(call("busy", f"busy-{i}", release)) for i in (1, 2)]
        await asyncio.sleep(0)
        assert not await gate.enter("busy")  # a fourth of "busy": over its cap, refused at once
        tasks.append(asyncio.create_task(call("other", "other-0", release)))
        await asyncio.sleep(0)
        first.set()
        await asyncio.gather(*tasks)
        return order

    # "busy" had two waiting before "other" came: "other" waits for one turn of it (a quantum of
    # one call), not for its whole backlog.
    assert asyncio.run(scenario()) == ["busy-0", "busy-1", "other-0", "busy-2"]


def test_a_cancelled_waiter_passes_its_slot_on() -> None:
    async def scenario() -> None:
        gate = fair.Admission(slots=1, per_tenant=0)
        assert await gate.enter("a")
        waiting = asyncio.create_task(gate.enter("b"))
        await asyncio.sleep(0)
        waiting.cancel()
        third = asyncio.create_task(gate.enter("c"))
        await asyncio.sleep(0)
        gate.leave("a")
        assert await asyncio.wait_for(third, 1)
        assert gate.calls("b") == 0

    asyncio.run(scenario())


def test_a_tenant_holding_the_most_slots_it_may_leaves_the_rest_to_the_others() -> None:
    """A flooding tenant's slow calls hold at most 6 of 8 slots: another tenant's call runs at
    once instead of waiting for one of them to end (regression: it waited for a free slot, 12-37
    ms behind a GetHand flood's calls; bench/README.md, section 13)."""

    async def scenario() -> None:
        gate = fair.Admission(slots=8, per_tenant=0, clock=lambda: 0.0)  # the window never ends
        assert await gate.enter("other")  # "other" calls now and then: the slots are shared
        gate.leave("other")
        release = asyncio.Event()
        ran: list[str] = []

        async def call(tenant: str, name: str) -> None:
            assert await gate.enter(tenant)
            ran.append(name)
            await release.wait()
            gate.leave(tenant)

        flood = [asyncio.create_task(call("flood", f"f{i}")) for i in range(10)]
        await asyncio.sleep(0)
        assert len(ran) == 6  # the other four wait in the flooder's own line
        assert await asyncio.wait_for(gate.enter("other"), 0.5)  # at once, two slots were free
        assert await asyncio.wait_for(gate.enter("third"), 0.5)
        waiting = asyncio.create_task(gate.enter("fourth"))  # every slot is taken now
        await asyncio.sleep(0)
        assert not waiting.done()
        flood[7].cancel()  # one waiting in the flooder's line gives up: nothing leaks
        gate.leave("other")
        assert await asyncio.wait_for(waiting, 0.5)  # the slot went to the tenant with one call
        release.set()
        await asyncio.gather(*flood, return_exceptions=True)
        gate.leave("third")
        gate.leave("fourth")
        assert sorted(ran) == [f"f{i}" for i in range(10) if i != 7]
        assert (gate._active, gate._entered, gate._lines, gate.calls("flood")) == (0, {}, {}, 0)

    asyncio.run(scenario())


def test_a_tenant_alone_takes_every_slot_and_its_line_empties_when_it_is_alone_again() -> None:
    """The reserve is for other tenants: one alone is not held to ``most`` (a game server with
    100 slow calls in flight lost a quarter of its throughput to slots nobody else wanted). Once
    the others have been gone for SHARED_WINDOW, its whole line goes in at its next leave."""

    async def scenario() -> None:
        now = [0.0]
        gate = fair.Admission(slots=8, per_tenant=0, clock=lambda: now[0])
        alone = [asyncio.ensure_future(gate.enter("bulk")) for _ in range(8)]
        await asyncio.sleep(0)
        assert all(t.done() and t.result() for t in alone)  # all 8, not 6
        for _ in range(8):
            gate.leave("bulk")
        assert await gate.enter("other")  # another tenant: now the slots are shared
        gate.leave("other")
        first = [asyncio.ensure_future(gate.enter("bulk")) for _ in range(8)]
        await asyncio.sleep(0)
        assert sum(t.done() for t in first) == 6  # two wait in its line
        now[0] += fair.SHARED_WINDOW + 0.1  # "other" has been gone for the window
        gate.leave("bulk")
        await asyncio.sleep(0)
        assert all(t.done() for t in first)  # both left in its line went in, at once
        assert gate._active == 7 and gate._entered == {"bulk": 7}
        for _ in range(7):
            gate.leave("bulk")
        assert (gate._active, gate._entered, gate._lines, gate.calls("bulk")) == (0, {}, {}, 0)

    asyncio.run(scenario())


ADMISSION_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("enter"), st.sampled_from("aab")),  # "a" floods more often
        st.tuples(st.just("leave"), st.integers(0, 40)),
        st.tuples(st.just("cancel"), st.integers(0, 40)),
        # A holder leaves and, before anything else runs, a waiter is cancelled: the place or
        # slot just handed over may be the one cancelled.
        st.tuples(st.just("leave_then_cancel"), st.integers(0, 40), st.integers(0, 40)),
        st.tuples(st.just("turns"), st.integers(1, 3)),
    ),
    min_size=10,
    max_size=100,
)


@settings(max_examples=300, deadline=None)
@given(slots=st.sampled_from([4, 5, 8]), per_tenant=st.sampled_from([0, 2, 5]), steps=ADMISSION_STEPS)
def test_admission_never_leaks_nor_strands_a_call_whatever_enters_leaves_or_is_cancelled(
    slots: int, per_tenant: int, steps: list[tuple[Any, ...]]
) -> None:
    """Any interleaving of enter, leave and cancellation (waiting in the tenant's line, waiting
    for a slot, just as either is handed over), checked against a model of who holds what: no
    slot, count or line entry leaks, no tenant holds more than ``most``, and once the loop is
    idle nobody waits in a line while its tenant is under ``most`` nor for a slot while one is
    free."""

    async def scenario() -> None:
        gate = fair.Admission(slots, per_tenant, clock=lambda: 0.0)  # shared for the whole run
        assert await gate.enter("c")  # a third tenant seen: the slots are shared from the start
        gate.leave("c")
        waiting: list[tuple[str, asyncio.Task[bool]]] = []
        holding: list[str] = []

        def settled() -> None:
            for tenant, task in list(waiting):
                if task.done():
                    waiting.remove((tenant, task))
                    if not task.cancelled() and task.result():
                        holding.append(tenant)  # refused (False) or cancelled: nothing to leave

        def check_idle() -> None:
            held = collections.Counter(holding)
            pending = collections.Counter(t for t, _ in waiting)
            assert gate._active == len(holding) <= slots
            assert gate._calls == {t: held[t] + pending[t] for t in "ab" if held[t] + pending[t]}
            for t in "ab":
                assert held[t] <= gate.most
                in_line = sum(not place.done() for place in gate._lines.get(t, ()))
                in_queue = pending[t] - in_line
                assert gate._entered.get(t, 0) == held[t] + in_queue <= gate.most
                assert not in_line or gate._entered[t] == gate.most, f"{t} waits in its line for nothing"
                assert not in_queue or gate._active == slots, f"{t} waits with a slot free"

        async def idle() -> None:
            for _ in range(10):
                await asyncio.sleep(0)
            settled()

        for step in steps:
            if step[0] == "enter":
                waiting.append((step[1], asyncio.ensure_future(gate.enter(step[1]))))
            elif step[0] == "leave" and holding:
                gate.leave(holding.pop(step[1] % len(holding)))
            elif step[0] == "cancel" and waiting:
                waiting[step[1] % len(waiting)][1].cancel()
            elif step[0] == "leave_then_cancel" and holding and waiting:
                gate.leave(holding.pop(step[1] % len(holding)))
                waiting[step[2] % len(waiting)][1].cancel()
            elif step[0] == "turns":
                for _ in range(step[1]):
                    await asyncio.sleep(0)
            settled()
            assert gate._active >= len(holding)  # a slot handed over is counted before its call runs
            assert all(n <= gate.most for n in collections.Counter(holding).values())
            await idle()
            check_idle()
        while waiting or holding:  # every call leaves once it is in: all of them get in
            while holding:
                gate.leave(holding.pop())
            await idle()
            assert holding or not waiting, "calls still wait after every holder left"
        assert (gate._active, gate._calls, gate._entered, gate._lines, len(gate._queue)) == (0, {}, {}, {}, 0)

    asyncio.run(scenario())


@pytest.mark.serial
def test_cpu_turns_interleave_one_tenants_slices_with_anothers_single_piece() -> None:
    async def scenario() -> list[str]:
        turns = fair.CpuTurns(quantum=1)
        ran: list[str] = []

        async def work(tenant: str, name: str, pieces: int) -> None:
            token = fair.bind(tenant)
            try:
                for i in range(pieces):
                    await turns.run(1, lambda i=i: ran.append(f"{name}{i}"))
            finally:
                fair.unbind(token)

        bulk = asyncio.create_task(work("bulk", "b", 6))
        await asyncio.sleep(0)  # b0 runs, b1 waits for a turn
        single = asyncio.create_task(work("one", "o", 1))
        await asyncio.gather(bulk, single)
        return ran

    ran = asyncio.run(scenario())
    assert ran.index("o0") <= 2, ran  # after the slice under way (and at most the next), not after all six


# -- the caps on a real dealer ---------------------------------------------------------------------


def test_streams_over_the_tenants_cap_are_refused_with_a_retry_delay(tmp_path: Path) -> None:
    config = {"max_streams": 2, "rate_limit": 0, "max_open_hands": 0, "require_auth": True}
    with RunningDealer(tmp_path / "d", **config) as running:
        keys = dealer_tokens(running, "acme", "zenith")
        with grpc.insecure_channel(running.target) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)
            request = pb.DealHandsRequest(deck="standard", hand_count=100_000)
            acme = (("authorization", f"Bearer {keys['acme']}"),)
            open_ = [stub.DealHands(request, metadata=acme, timeout=30) for _ in range(2)]
            for call in open_:
                next(call)  # both run, and stay open: nobody reads them further
            with DealerClient(running.target, api_token=keys["acme"], retries=0) as c:
                began = time.monotonic()
                with pytest.raises(ResourceExhausted) as refused:
                    list(c.deal_hands(hand_count=1))
                held = time.monotonic() - began
            assert refused.value.reason == "TOO_MANY_STREAMS"
            delay = retry_delay(refused.value)
            assert delay is not None and 0 < delay <= 1.0 and 0.5 < held + delay < 2.5
            with DealerClient(running.target, api_token=keys["zenith"], retries=0) as z:
                assert len(list(z.deal_hands(hand_count=3))) == 3  # another tenant's cap is its own
            for call in open_:
                call.cancel()
            assert running.server is not None
            streams = running.server.limits.streams
            wait_for("the cancelled streams to leave the cap", lambda: streams._open.get("acme", 0) == 0)
            with DealerClient(running.target, api_token=keys["acme"], retries=0) as c:
                assert len(list(c.deal_hands(hand_count=3))) == 3  # a stream ended: room again


@pytest.mark.serial
def test_calls_over_the_tenants_cap_in_flight_are_refused_and_others_are_not(tmp_path: Path) -> None:
    config = {"max_calls_in_flight": 2, "rate_limit": 0, "max_open_hands": 0, "require_auth": True}
    with RunningDealer(tmp_path / "d", **config) as running:
        keys = dealer_tokens(running, "acme", "zenith")
        with DealerClient(running.target, api_token=keys["acme"]) as c:
            c.deal_new_hand()  # the database exists and the token is cached
        # Another connection holds the database's write lock: calls stay in flight meanwhile.
        blocker = sqlite3.connect(tmp_path / "d" / "fairdeck.db", isolation_level=None, timeout=10)
        blocker.execute("BEGIN IMMEDIATE")
        stuck: list[object] = []
        try:
            threads = [
                threading.Thread(target=lambda: stuck.append(_deal(running.target, keys["acme"])))
                for _ in range(2)
            ]
            for t in threads:
                t.start()
            assert running.server is not None
            admission = running.server.limits.admission
            wait_for("acme's two calls in flight", lambda: admission.calls("acme") == 2)
            with (
                DealerClient(running.target, api_token=keys["acme"], retries=0) as c,
                pytest.raises(ResourceExhausted) as refused,
            ):
                c.deal_new_hand()
            assert refused.value.reason == "TOO_MANY_CALLS"
            assert retry_delay(refused.value) is not None
            zenith = threading.Thread(target=lambda: stuck.append(_deal(running.target, keys["zenith"])))
            zenith.start()  # admitted: its own cap is untouched (it waits for the lock like the others)
            wait_for("zenith's call in flight", lambda: admission.calls("zenith") == 1)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        for t in [*threads, zenith]:
            t.join(timeout=30)
    assert stuck == ["OK"] * 3


def _deal(target: str, token: str) -> str:
    with DealerClient(target, api_token=token, retries=0, timeout=30) as c:
        c.deal_new_hand()
    return "OK"


def test_a_call_does_not_wait_for_a_shared_slice_smaller_than_a_turn() -> None:
    # While tenants share, DealHands slices are 16 hands (bulk.SHARED_SLICE), half the writer's
    # 32-hand turn: still heavier than a call's one hand, so a batch begun by the call ends
    # before the slice. Counted light, the slice went into the call's batch, and the call waited
    # for 16 hands' rows and their WAL pages to be written with its own.
    q: fair.FairQueue[str] = fair.FairQueue(quantum=32)
    for i in range(4):
        q.push("bulk", f"s{i}", 16)
    assert fair.take_turns(q, alone=32, most=512) == ["s0", "s1"]
    q.push("victim", "v0", 1)
    assert fair.take_turns(q, alone=32, most=512) == ["v0"]
    assert fair.take_turns(q, alone=32, most=512) == ["s2", "s3"]


def test_a_slice_is_not_held_back_batch_after_batch_by_light_work_arriving() -> None:
    # A bulk tenant's slices, and one call's one hand from a tenant new to the queue before each
    # batch (many tenants each making a call): a batch begun light ends before a slice, but the
    # next one takes the slice, so the bulk tenant keeps a turn at least every other batch.
    q: fair.FairQueue[str] = fair.FairQueue(quantum=32)
    for i in range(20):
        q.push("bulk", f"s{i}", 32)
    slices = 0
    for n in range(20):
        q.push(f"t{n}", f"h{n}", 1)
        slices += sum(1 for item in fair.take_turns(q, alone=32, most=512) if item.startswith("s"))
    assert slices >= 10
