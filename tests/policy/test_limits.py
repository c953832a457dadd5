"""Abuse limits on a real dealer through the real SDK: the request rate per
tenant, the open-hands cap and the message size (the default deadline:
test_deadline.py). Refusals are RESOURCE_EXHAUSTED with a stable reason and a
RetryInfo; health checks are never limited."""

# The SDK's own retries are off (retries=0) here: these tests watch the dealer's refusals
# themselves; the SDK's waiting them out is tests/client/test_retries.py.

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client import AsyncDealerClient, DealerClient
from fairdeck.client.exceptions import FairdeckError, ResourceExhausted
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from fairdeck_server.edge.interceptors import CAP_AGAIN, hands_requested
from fairdeck_server.edge.methods import Malformed, call_cost
from fairdeck_server.policy.limits import OpenHandsCap, RateLimiter
from tests.support.connections import OWN_CONNECTION, connections_for
from tests.support.dealers import RunningDealer
from tests.support.ops import Clock, dealer_tokens, details, retry_delay, scrape
from tests.support.speed import scaled
from tests.support.waits import outlast, pace, wait_for_async

DEALER = "/fairdeck.v1.DealerService/"
GET = ("method", "GetHand")


# -- the pieces, with a clock we move ------------------------------------------------------


def test_token_bucket_refills_at_the_rate_and_keeps_tenants_apart() -> None:
    clock = Clock()
    bucket = RateLimiter(rate=4.0, burst=2, clock=clock)
    assert bucket.acquire("acme") is None
    assert bucket.acquire("acme") is None
    assert bucket.acquire("acme") == pytest.approx(0.25)  # one token comes back in 1/4 s
    assert bucket.acquire("zenith") is None  # another tenant has its own bucket
    clock.now += 0.125
    assert bucket.acquire("acme") == pytest.approx(0.125)  # half a token so far
    clock.now += 0.125
    assert bucket.acquire("acme") is None
    clock.now += 60  # refills to the burst, not beyond
    assert [bucket.acquire("acme") for _ in range(3)] == [None, None, 0.25]
    assert RateLimiter(rate=0, burst=0).acquire("acme") is None  # 0: off


def test_open_hands_cap_reserves_locally_and_rereads_before_refusing() -> None:
    stored = {"acme": 0}
    reads: list[str] = []

    async def count_open(tenant: str) -> int:
        reads.append(tenant)
        return stored[tenant]

    async def scenario() -> None:
        clock = Clock()
        cap = OpenHandsCap(count_open, 3, ttl=1.0, min_reread=0.1, clock=clock)
        assert await cap.reserve("acme", 2) is None
        assert await cap.reserve("acme", 1) is None  # from the cache: no second read
        assert reads == ["acme"]
        assert await cap.reserve("acme", 1) == 1.0  # the cache says 3 open; too soon to reread
        stored["acme"] = 3
        for hands in (2, 1):
            cap.release("acme", hands)  # the calls ended; storage shows their hands
        stored["acme"] = 1  # two were closed since
        clock.now += 0.2
        assert await cap.reserve("acme", 2) is None  # reread before refusing: 1 open
        assert len(reads) == 2
        stored["acme"] = 1  # the reservation's call is still running: storage does not show it
        clock.now += 5
        assert await cap.reserve("acme", 1) == 1.0  # 1 stored + 2 in flight: full
        assert await cap.reserve("acme", 0) is None  # asking for nothing is never refused

    asyncio.run(scenario())


def test_a_tenant_calling_steadily_never_waits_for_its_count() -> None:
    """Late in its ttl the count is read again in the background when the tenant calls, and the
    call goes on (regression: every ttl one call of each tenant waited for the count in the
    reader's queue, behind other tenants' reads: during a GetHand flood 10-25 ms, in the victim's
    slowest 1%). A call never waits for it, and what the read finds is used once it is back."""
    stored = {"acme": 0}
    reads: list[float] = []
    gate = asyncio.Event()

    async def scenario() -> None:
        clock = Clock()

        async def count_open(tenant: str) -> int:
            reads.append(clock.now)
            await gate.wait()
            return stored[tenant]

        cap = OpenHandsCap(count_open, 3, ttl=1.0, min_reread=0.1, clock=clock)
        gate.set()
        assert await cap.reserve("acme", 1) is None  # the first count: read while it waits
        cap.release("acme", 1)  # that call ended; its hand is open
        gate.clear()  # from now on a read does not come back until the gate opens
        clock.now += 0.4
        assert await asyncio.wait_for(cap.reserve("acme", 0), 1) is None
        assert len(reads) == 1  # young enough: no read
        stored["acme"] = 0  # the hand was closed since
        clock.now += 0.45  # 0.85 s old: read ahead, and the call does not wait for it
        assert await asyncio.wait_for(cap.reserve("acme", 1), 1) is None
        await asyncio.sleep(0)
        assert reads == [100.0, pytest.approx(100.85)]
        assert await asyncio.wait_for(cap.reserve("acme", 1), 1) is None  # one read at a time
        assert len(reads) == 2
        gate.set()
        await wait_for_async("the count read ahead to be back", lambda: not cap._ahead._tasks)
        clock.now += 0.45  # 1.3 s after the first read, 0.45 s after the one made ahead
        assert await asyncio.wait_for(cap.reserve("acme", 1), 1) is None  # 0 stored + 2 in flight
        assert len(reads) == 2, "the count read ahead was not used"
        assert await cap.reserve("acme", 1) == 1.0  # 3 open: full, and told so
        cap.close()

    asyncio.run(scenario())


def test_a_call_that_ends_while_its_tenant_is_counted_is_not_lost(tmp_path: Path) -> None:
    """The count is read on the SQLite reader's thread, in a snapshot taken when it runs; a call
    whose hand commits after that snapshot and that releases its reservation before the count
    comes back is then in neither the stored count nor the calls in flight, so the cap let one
    more in than it allows. (Counted on the writer, the count and the writes took turns in one
    order, and the count was exact.) Here the reader is held, after the count's query, by a read
    of the same transaction until the call has ended."""
    from fairdeck_server.storage.sqlite import SqliteStorage
    from tests.support.engines import new_hand

    async def scenario() -> list[float | None]:
        storage = SqliteStorage(tmp_path / "fairdeck.db")
        await storage.start()
        try:
            clock = Clock()
            cap = OpenHandsCap(storage.open_hands, 2, ttl=1.0, min_reread=0.1, clock=clock)
            assert await cap.reserve("t", 1) is None  # call A: 0 stored
            clock.now += 5  # the next call reads the count again
            gate = threading.Event()

            holding = threading.Event()

            def hold(conn: sqlite3.Connection) -> None:  # after the count, in its transaction
                holding.set()
                gate.wait(10)

            b = asyncio.ensure_future(cap.reserve("t", 1))  # call B: its count is queued...
            await asyncio.sleep(0)
            held = asyncio.ensure_future(storage._reader.submit(hold))  # ...and this with it
            # The count has run: its snapshot shows no hand.
            await wait_for_async("the count's transaction to be held", holding.is_set)
            await storage.create_hands([new_hand(1)])  # call A's hand, acknowledged
            cap.release("t", 1)  # call A ends
            gate.set()
            await held
            got = [await b]
            # Two open (A's stored, B's in flight): a third is one too many.
            got.append(await cap.reserve("t", 1))
            return got
        finally:
            await storage.close()

    assert asyncio.run(scenario()) == [None, 1.0]


def test_what_counts_as_opening_hands() -> None:
    assert hands_requested(DEALER + "OpenHand", pb.OpenHandRequest()) == 1
    assert hands_requested(DEALER + "DealNewHand", pb.DealNewHandRequest()) == 1
    assert hands_requested(DEALER + "DealHands", pb.DealHandsRequest(hand_count=40)) == 40
    assert hands_requested(DEALER + "DealHands", pb.DealHandsRequest(hand_count=40, close=True)) == 40
    assert hands_requested(DEALER + "DealHands", pb.DealHandsRequest(hand_count=10**5, close=True)) == 512
    assert hands_requested(DEALER + "DealHands", pb.DealHandsRequest(hand_count=10**6)) == 0  # refused anyway
    assert hands_requested(DEALER + "OpenHand", Malformed("x")) == 0
    assert hands_requested(DEALER + "CloseHand", pb.CloseHandRequest()) == 0


# -- on a running dealer -------------------------------------------------------------------


def _health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return int(reply.status)


def test_rate_limit_refuses_with_reason_and_retry_delay(tmp_path: Path) -> None:
    with (
        RunningDealer(tmp_path / "d", rate_limit=1.0, rate_burst=3) as running,
        DealerClient(running.target, retries=0) as c,
    ):
        hand = c.open_hand()
        c.get(hand.hand_id)
        c.get(hand.hand_id)
        with pytest.raises(ResourceExhausted) as refused:
            c.get(hand.hand_id)
        error = refused.value
        assert error.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.reason == "RATE_LIMITED"
        delay = retry_delay(error)
        assert delay is not None and 0 < delay <= 1.0
        assert error.retry_delay == delay  # the SDK surfaces the hint
        assert details(error).code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
        for _ in range(5):  # health checks and reflection are never limited
            assert _health(running.target) == health_pb2.HealthCheckResponse.SERVING
        outlast(delay + 0.05)
        assert c.get(hand.hand_id).hand_id == hand.hand_id


def test_a_request_counts_one_call_and_one_more_per_started_16_kib_past_64_kib() -> None:
    assert call_cost(pb.GetHandRequest(hand_id="h1")) == 1
    biggest_needed = pb.DealNewHandRequest(
        deck="standard", client_seeds=[pb.ClientSeed(data=bytes(256))] * 64
    )
    assert call_cost(biggest_needed) == 1  # about 17 KiB
    assert call_cost(pb.DealNewHandRequest(client_seeds=[pb.ClientSeed(data=bytes(7_900))] * 65)) == 29
    assert call_cost(Malformed("fairdeck.v1.GetHandRequest", 100_000)) == 4  # its raw bytes
    clock = Clock()
    bucket = RateLimiter(rate=1.0, burst=10, clock=clock)
    assert bucket.acquire("acme", 32) is None  # more than the burst: it costs the whole burst
    assert bucket.acquire("acme", 1) == pytest.approx(1.0)


def test_a_request_the_sdk_makes_with_text_seeds_counts_one_call() -> None:
    """The SDK sends text seeds as they are (the dealer normalizes them), and a seed is limited
    by its NFC bytes: 85 Hangul syllables typed decomposed (NFD, as macOS input gives) are 765
    bytes on the wire and 255 after NFC. 64 of them, a valid DealNewHand, are 49 KiB: they
    counted 4 calls, not the one every request a client needs was promised to count."""
    import unicodedata

    from fairdeck.client.models import client_seed_to_proto
    from fairdeck.core.seeds import normalize_client_seeds

    seed = unicodedata.normalize("NFD", "\ud55c" * 85)
    assert len(normalize_client_seeds([seed] * 64)[0]) == 255  # valid by the rules
    request = pb.DealNewHandRequest(
        deck="standard", client_seeds=[client_seed_to_proto(seed)] * 64, request_id="r" * 64
    )
    assert call_cost(request) == 1, request.ByteSize()


def test_a_flood_of_the_largest_requests_is_rate_limited_by_their_size(tmp_path: Path) -> None:
    """Requests just under the 512 KiB limit, each refused (one seed too many): receiving and
    parsing them cost the dealer about 30 small calls each, before any handler. They counted one call
    each, so a tenant could send 500 a second of them (the abuse benchmark's "largest" row)."""
    seed = pb.ClientSeed(data=os.urandom(7_900))
    largest = pb.DealNewHandRequest(deck="standard", client_seeds=[seed] * 65)
    with (
        RunningDealer(tmp_path / "d", rate_limit=1.0, rate_burst=40) as running,
        grpc.insecure_channel(running.target) as channel,
        DealerClient(running.target, retries=0) as c,
    ):
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        codes = []
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as e:
                stub.DealNewHand(largest, timeout=10)
            codes.append(e.value.code())
        # The first is refused by the dealer (one seed too many); it took 29 of the 40 tokens.
        assert codes == [grpc.StatusCode.INVALID_ARGUMENT] + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2
        passed = 0
        with pytest.raises(ResourceExhausted) as refused:
            for _ in range(30):  # small calls pass until the rest of the tokens are spent
                c.deal_new_hand()
                passed += 1
        assert refused.value.reason == "RATE_LIMITED" and 1 <= passed < 30


def test_a_body_of_repeated_fields_counts_its_received_bytes(tmp_path: Path) -> None:
    """A body of one singular field sent again and again (last one wins, as protobuf parses)
    costs the dealer its whole size to receive and parse, but the message it parses to is a few
    bytes: counted by the parsed message's ByteSize, 500 KiB of it counted one call, so the
    size rule was bypassed by any body that repeats a field."""
    one = pb.GetHandRequest(hand_id="h" * 60).SerializeToString()
    body = one * (500 * 1024 // len(one))
    assert pb.GetHandRequest.FromString(body).ByteSize() < 100  # what it parses to
    with (
        RunningDealer(tmp_path / "d", rate_limit=1.0, rate_burst=40) as running,
        grpc.insecure_channel(running.target) as channel,
    ):
        get = channel.unary_unary(DEALER + "GetHand")  # bytes as they are, no serializer
        codes = []
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as e:
                get(body, timeout=10)
            codes.append(e.value.code())
        # The first took 29 of the 40 tokens (500 KiB received); the next finds 11.
        assert codes == [grpc.StatusCode.NOT_FOUND] + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2, codes


def test_one_tenant_exhausted_leaves_another_alone(tmp_path: Path) -> None:
    with RunningDealer(tmp_path / "d", rate_limit=0.5, rate_burst=2, require_auth=True) as running:
        tokens = dealer_tokens(running, "acme", "zenith")
        with (
            DealerClient(running.target, api_token=tokens["acme"], retries=0) as acme,
            DealerClient(running.target, api_token=tokens["zenith"], retries=0) as zenith,
        ):
            acme.open_hand()
            acme.open_hand()
            with pytest.raises(ResourceExhausted) as refused:
                acme.open_hand()
            assert refused.value.reason == "RATE_LIMITED"
            zenith.open_hand()  # its own bucket is full
            zenith.open_hand()
            with pytest.raises(ResourceExhausted):
                zenith.open_hand()


@pytest.mark.serial
def test_a_tenant_with_hundreds_of_refusals_held_gets_them_answered_at_a_bounded_rate(
    tmp_path: Path,
) -> None:
    """2,500 GetHand in flight from one client were each refused after its short retry delay, so
    the client sent the next at once and the one event loop refused about 1,400 a second, the
    other tenants waiting behind. Now the n-th refusal a tenant has held at once waits
    n / HELD_ANSWERS_PER_S: 400 in flight are answered over about 4 s, not all within the first
    (the old code answered all of them by 0.6 s). Another tenant is not held at all (on its own
    connection: one connection's calls past max_streams_per_connection wait in its client). The
    flood goes over 8 connections of its own, so that all 400 are at the dealer at once: on one,
    the dealer saw 50 at a time, each held at most 0.5 s, and the test passed on the old code.
    Zenith calls once the dealer has seen every call of the flood begin."""
    calls = 400
    with RunningDealer(
        tmp_path / "d", rate_limit=2, rate_burst=1, require_auth=True, metrics_listen="127.0.0.1:0"
    ) as running:
        tokens = dealer_tokens(running, "acme", "zenith")

        def begun() -> float:
            samples = scrape(running).items()
            started = "fairdeck_rpcs_started_total"
            return sum(v for (name, ls), v in samples if name == started and GET in ls)

        async def flood() -> tuple[list[float], float]:
            channels = [
                grpc.aio.insecure_channel(running.target, options=OWN_CONNECTION)
                for _ in range(connections_for(calls) + 1)
            ]
            *flooders, other_channel = channels
            try:
                await asyncio.gather(*(c.channel_ready() for c in channels))
                began = time.monotonic()

                async def one(token: str, on: grpc.aio.Channel) -> float:
                    request = pb.GetHandRequest(hand_id="h" * 26)
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await dealer_pb2_grpc.DealerServiceStub(on).GetHand(
                            request, metadata=(("authorization", f"Bearer {token}"),), timeout=30
                        )
                    assert e.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.NOT_FOUND)
                    return time.monotonic() - began

                flooding = [
                    asyncio.ensure_future(one(tokens["acme"], flooders[i % len(flooders)]))
                    for i in range(calls)
                ]
                # Held meanwhile: the last of them about 4 s.
                await wait_for_async("every call of the flood began at the dealer", lambda: begun() >= calls)
                asked = time.monotonic() - began
                other = await one(tokens["zenith"], other_channel) - asked  # its own bucket: not held
                return await asyncio.gather(*flooding), other
            finally:
                await asyncio.gather(*(c.close(None) for c in channels))

        answered, other = asyncio.run(flood())
        assert other < 0.5, other
        assert sum(1 for t in answered if t < 1.0) <= 150, sorted(answered)[:10]
        assert max(answered) > 3.0, max(answered)


@pytest.mark.serial
def test_a_held_refusal_is_answered_before_the_default_deadline_cuts_it(tmp_path: Path) -> None:
    """A client with no deadline of its own, 200 GetHand at once: the 100th held waits 1 s, the
    dealer's default deadline here. Each hold stays under half that deadline, so every call is
    answered RESOURCE_EXHAUSTED (with its RetryInfo), none DEADLINE_EXCEEDED as if it had run.
    Over 4 connections of their own: on one, the dealer saw 50 at once (its streams per
    connection), held none past 0.5 s, and the test passed with the bound removed."""
    with RunningDealer(
        tmp_path / "d", rate_limit=2, rate_burst=1, require_auth=True, default_deadline=1.0
    ) as running:
        token = dealer_tokens(running, "acme")["acme"]

        async def flood() -> list[str]:
            calls = 200
            channels = [
                grpc.aio.insecure_channel(running.target, options=OWN_CONNECTION)
                for _ in range(connections_for(calls))
            ]
            try:
                await asyncio.gather(*(c.channel_ready() for c in channels))

                async def one(i: int) -> str:
                    stub = dealer_pb2_grpc.DealerServiceStub(channels[i % len(channels)])
                    try:
                        await stub.GetHand(
                            pb.GetHandRequest(hand_id="h" * 26),
                            metadata=(("authorization", f"Bearer {token}"),),
                        )
                    except grpc.aio.AioRpcError as e:
                        return e.code().name
                    return "OK"

                return await asyncio.gather(*(one(i) for i in range(calls)))
            finally:
                await asyncio.gather(*(c.close(None) for c in channels))

        codes = asyncio.run(flood())
        assert set(codes) <= {"RESOURCE_EXHAUSTED", "NOT_FOUND"}, sorted(set(codes))


@pytest.mark.serial
def test_refusals_held_to_the_deadline_bound_are_answered_spread_out(tmp_path: Path) -> None:
    """800 GetHand at once with 8 s deadlines: every refusal past the 400th reaches the bound of
    half the deadline (4 s, at 100 held answers a second). They were all answered together, and a
    client retrying at once sent them all again together (a burst the other tenants wait behind);
    now each is held between half that bound and the bound. Measured per call (its own latency)
    as the interquartile range of the 400 held longest: held to the bound, they differ only by
    how long each took to reach the dealer. Over 20 connections: one connection has at most
    max_streams_per_connection (50) calls at the dealer, its client keeps the others until one
    ends. (With 4 s deadlines, on two busy cores the spread came down to 0.27 s against a bar of
    0.25 and the slowest answer to 3.70 s against 3.8: the loop's lateness bunches answers and
    delays arrivals by the same seconds whatever the deadline, so the bound is doubled.)"""
    with RunningDealer(tmp_path / "d", rate_limit=2, rate_burst=1, require_auth=True) as running:
        token = dealer_tokens(running, "acme")["acme"]

        async def flood() -> list[float]:
            channels = [grpc.aio.insecure_channel(running.target, options=OWN_CONNECTION) for _ in range(20)]
            try:
                await asyncio.gather(*(c.channel_ready() for c in channels))

                async def one(i: int) -> float:
                    sent = time.monotonic()
                    stub = dealer_pb2_grpc.DealerServiceStub(channels[i % len(channels)])
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await stub.GetHand(
                            pb.GetHandRequest(hand_id="h" * 26),
                            metadata=(("authorization", f"Bearer {token}"),),
                            timeout=8.0,
                        )
                    assert e.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.NOT_FOUND)
                    return time.monotonic() - sent

                return await asyncio.gather(*(one(i) for i in range(800)))
            finally:
                await asyncio.gather(*(c.close() for c in channels))

        took = sorted(asyncio.run(flood()))
        held = took[400:]  # the 400 held to the bound
        spread = held[300] - held[100]  # their interquartile range
        # Held to the bound (4 s deadlines): 0.05 s quiet, 0.13 s under two busy loops; spread
        # then 0.38-0.44 s quiet, 0.27 s on two busy cores. Here about 1 s, but 0.38 s was seen in
        # a slow run of the whole suite: the bar sits between the two, at 0.2 s.
        assert spread >= 0.2, f"the 400 slowest were answered within {spread:.2f} s of each other"
        assert max(took) < 7.6, max(took)  # every one answered before the client's deadline


def test_a_rate_of_zero_turns_the_limit_off(tmp_path: Path) -> None:
    with (
        RunningDealer(tmp_path / "d", rate_limit=0, rate_burst=1) as running,
        DealerClient(running.target, retries=0) as c,
    ):
        hand = c.open_hand()
        for _ in range(20):
            c.get(hand.hand_id)


@pytest.mark.light
def test_open_hands_cap(tmp_path: Path) -> None:
    config = {"max_open_hands": 3, "rate_limit": 0}
    with RunningDealer(tmp_path / "d", **config) as running, DealerClient(running.target, retries=0) as c:
        first = c.open_hand()
        c.open_hand()
        c.deal_new_hand()
        refused_calls = (
            c.open_hand,
            c.deal_new_hand,
            lambda: list(c.deal_hands(hand_count=1)),
            lambda: list(c.deal_hands(hand_count=1, close=True)),  # in flight while it runs
        )
        for call in refused_calls:
            pace(CAP_AGAIN)  # each the first refusal in a while: answered at once
            with pytest.raises(ResourceExhausted) as refused:
                call()
            assert refused.value.reason == "TOO_MANY_OPEN_HANDS"
            assert retry_delay(refused.value) == pytest.approx(1.0)
            assert refused.value.retry_delay == pytest.approx(1.0)
        c.close_hand(first.hand_id)
        outlast(0.15)  # the cap rereads storage before refusing, at most every 0.1 s
        assert len(list(c.deal_hands(hand_count=1, close=True))) == 1  # created closed: never open
        outlast(0.15)
        with pytest.raises(ResourceExhausted):
            list(c.deal_hands(hand_count=2))  # 2 open + 2 > 3
        outlast(0.15)
        c.open_hand()
        running.restart()  # counted from storage: a restart forgets nothing
        with DealerClient(running.target, retries=0) as again, pytest.raises(ResourceExhausted):
            again.open_hand()


@pytest.mark.paired  # a hold of the retry delay, at least
def test_asking_again_while_capped_is_held_like_a_flood(tmp_path: Path) -> None:
    """The first TOO_MANY_OPEN_HANDS is answered at once: the caller should close some. Asking
    again within CAP_AGAIN is a flood (the abuse benchmark's 8 threads asked 1,400 times a second,
    each refusal costing the dealer a whole call), so it is held for its retry delay first."""
    with (
        RunningDealer(tmp_path / "d", max_open_hands=1, rate_limit=0) as running,
        DealerClient(running.target, retries=0) as c,
    ):
        c.open_hand()
        took = []
        for _ in range(3):
            began = time.monotonic()
            with pytest.raises(ResourceExhausted) as refused:
                c.open_hand()
            took.append(time.monotonic() - began)
            assert refused.value.reason == "TOO_MANY_OPEN_HANDS"
        # Held: most of the 1 s retry delay, a product timer (not scaled). The first is answered at
        # once: its bar is scaled with the machine, but under the hold a held first would take.
        assert took[0] < scaled(0.5, under=0.6) and min(took[1:]) > 0.8, took
        assert refused.value.retry_delay is not None and refused.value.retry_delay < 0.2


def test_refused_opens_free_their_slots_at_once(tmp_path: Path) -> None:
    """An open the dealer refused (an unknown deck) opened nothing, yet it held its slot of the
    cap until the next read of storage (up to 1 s): a tenant at its cap minus one that made one
    bad call was refused TOO_MANY_OPEN_HANDS for its next good one."""
    with (
        RunningDealer(tmp_path / "d", max_open_hands=3, rate_limit=0) as running,
        DealerClient(running.target, retries=0) as c,
    ):
        c.open_hand()
        c.open_hand()
        for _ in range(3):
            with pytest.raises(FairdeckError) as refused:
                c.open_hand("no-such-deck")
            assert refused.value.reason == "UNKNOWN_DECK"
        c.open_hand()  # the third slot: the refused opens never held it
        with pytest.raises(ResourceExhausted):
            c.open_hand()


def test_a_burst_of_opens_cannot_overshoot_the_cap(tmp_path: Path) -> None:
    async def burst(target: str) -> list[str]:
        async with AsyncDealerClient(target, retries=0) as c:
            results = await asyncio.gather(*(c.open_hand() for _ in range(12)), return_exceptions=True)
        outcomes = []
        for r in results:
            assert not isinstance(r, BaseException) or isinstance(r, ResourceExhausted), r
            outcomes.append("refused" if isinstance(r, ResourceExhausted) else "opened")
        return outcomes

    with RunningDealer(tmp_path / "d", max_open_hands=4, rate_limit=0) as running:
        outcomes = asyncio.run(burst(running.target))
        assert outcomes.count("opened") == 4
        assert running.server is not None
        assert running._run(running.server.storage.open_hands("default")) == 4


def test_messages_over_the_size_limit_are_refused_by_grpc(tmp_path: Path) -> None:
    with (
        RunningDealer(tmp_path / "d", max_message_bytes=4096, rate_limit=0) as running,
        DealerClient(running.target, retries=0) as c,
    ):
        with pytest.raises(ResourceExhausted) as big:
            c.deal_new_hand(client_seeds=["x" * 200] * 64)  # ~13 KB request
        assert big.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(FairdeckError) as big_answer:
            list(c.deal_hands(hand_count=256))  # one ~30 KB response message
        assert big_answer.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert c.deal_new_hand(client_seeds=["x" * 200]).hand.hand_id  # small ones pass
