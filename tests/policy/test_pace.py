"""A tenant's burst while another tenant calls: within its rate's burst nothing is refused, but
past PACE_AT_ONCE its calls start at its rate (limits.RateLimiter.pace), so that the burst is
served in turn with the others' calls instead of all at once; alone, it is served at once. A
call whose wait would pass half its deadline is refused RATE_LIMITED instead of running out of
time. On a real dealer through the real SDK (its retries off: these tests watch the dealer)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fairdeck.client import AsyncDealerClient
from fairdeck.client.exceptions import ResourceExhausted
from fairdeck_server.fair import SHARED_WINDOW
from fairdeck_server.policy.limits import PACE_AT_ONCE, PACE_RATE, RateLimiter
from tests.support.connections import OWN_CONNECTION
from tests.support.dealers import RunningDealer
from tests.support.ops import Clock, dealer_tokens, sample, scrape
from tests.support.speed import scaled
from tests.support.waits import outlast, outlast_async, pace_async, wait_for_async

# Zenith has a connection of its own, as another game server has: sharing acme's (gRPC's global
# subchannel pool), its calls queued in the client behind acme's burst and its 50 streams, reached
# the dealer a second late on a slow machine, and acme, counted alone, went unpaced (1.09 s for 2).


def test_a_burst_starts_a_few_at_once_then_at_the_rate() -> None:
    clock = Clock()
    bucket = RateLimiter(rate=10.0, burst=1000, clock=clock)
    step = 1 / (10.0 * PACE_RATE)
    waits = [bucket.pace("acme") for _ in range(PACE_AT_ONCE + 3)]
    assert waits[:PACE_AT_ONCE] == [0.0] * PACE_AT_ONCE
    assert waits[PACE_AT_ONCE:] == pytest.approx([0.0, step, 2 * step])
    assert bucket.pace("zenith") == 0.0  # another tenant has its own pace
    assert bucket.pace("acme", cost=4) == pytest.approx(3 * step)  # a large request takes 4 places
    assert bucket.pace("acme") == pytest.approx(7 * step)
    assert bucket.pace("acme", most=step) == pytest.approx(8 * step)  # too long: takes no place
    assert bucket.pace("acme") == pytest.approx(8 * step)
    clock.now += 60  # a pause: at once again
    assert [bucket.pace("acme") for _ in range(PACE_AT_ONCE)] == [0.0] * PACE_AT_ONCE
    assert RateLimiter(rate=0, burst=0).pace("acme") == 0.0  # no rate: no pace


def _dealer(tmp_path: Path, rate: float) -> RunningDealer:
    return RunningDealer(
        tmp_path / "d", rate_limit=rate, rate_burst=1000, require_auth=True, metrics_listen="127.0.0.1:0"
    )


async def _gets(
    running: RunningDealer,
    tokens: dict[str, str],
    n: int,
    *,
    share: bool,
    timeout: float,
    calling: bool = False,
) -> tuple[float, list[object]]:
    """``n`` concurrent GetHand of acme's (after one of zenith's when ``share``; with ``calling``,
    zenith goes on calling every 0.25 s): how long they took and what each ended with. With one
    call before it, a machine 10 times slower than usual delivered the burst past SHARED_WINDOW,
    and its later calls were rightly served unpaced (1.2 s for a 2 s pace)."""
    async with (
        AsyncDealerClient(running.target, api_token=tokens["acme"], retries=0) as acme,
        AsyncDealerClient(
            running.target, api_token=tokens["zenith"], retries=0, options=OWN_CONNECTION
        ) as zenith,
    ):
        hand = await acme.open_hand()
        caller = None
        if share:
            own = (await zenith.open_hand()).hand_id  # zenith called within the last second

            async def zenith_calls() -> None:
                while True:
                    await pace_async(0.25)
                    await zenith.get(own)

            caller = asyncio.ensure_future(zenith_calls()) if calling else None
        began = time.monotonic()
        got = await asyncio.gather(
            *(acme.get(hand.hand_id, timeout=timeout) for _ in range(n)), return_exceptions=True
        )
        took = time.monotonic() - began
        if caller is not None:
            caller.cancel()
            await asyncio.gather(caller, return_exceptions=True)
        return took, got


@pytest.mark.serial  # alone, the burst is held to the pace less 1 s
def test_a_burst_is_served_at_the_rate_while_another_tenant_calls_and_at_once_alone(tmp_path: Path) -> None:
    """40 calls past PACE_AT_ONCE at 20 a second take 2 s while zenith calls; alone, a fraction
    of that. None is refused either way. The metrics count the calls that waited (the first
    past PACE_AT_ONCE is due at once) and their waits. Fails without the pace."""
    past, rate = 40, 20.0
    step = 1 / (rate * PACE_RATE)
    with _dealer(tmp_path, rate) as running:
        tokens = dealer_tokens(running, "acme", "zenith")
        alone, got = asyncio.run(_gets(running, tokens, PACE_AT_ONCE + past, share=False, timeout=30))
        assert not [g for g in got if isinstance(g, BaseException)]
        assert sample(scrape(running), "fairdeck_paced_calls_total") == 0
        outlast(SHARED_WINDOW + 0.2)
        shared, got = asyncio.run(
            _gets(running, tokens, PACE_AT_ONCE + past, share=True, timeout=30, calling=True)
        )
        assert not [g for g in got if isinstance(g, BaseException)]
        samples = scrape(running)
    assert shared >= past * step - 0.1
    # Alone: the calls' own work, scaled with the machine, but under the pace (the bug's time).
    assert alone < scaled(past * step - 1.0, under=past * step - 0.4)
    # Calls that reach the dealer late (a loaded machine) are due by then: fewer wait, less.
    paced = sample(samples, "fairdeck_paced_calls_total")
    waited = sample(samples, "fairdeck_paced_seconds_total")
    assert 0 < paced <= past - 1, paced
    assert 0 < waited <= step * past * (past - 1) / 2, waited


@pytest.mark.paired  # due times are absolute: a late arrival changes nothing
def test_a_call_that_would_wait_past_half_its_deadline_is_refused_instead(tmp_path: Path) -> None:
    """At 2 a second and a 2.5 s deadline a call may wait 1.25 s: the 65th to 67th of a burst
    start (after 0, 0.5 and 1 s), the rest are refused RATE_LIMITED, none ends
    DEADLINE_EXCEEDED."""
    with _dealer(tmp_path, 2.0 / PACE_RATE) as running:
        tokens = dealer_tokens(running, "acme", "zenith")
        _, got = asyncio.run(_gets(running, tokens, PACE_AT_ONCE + 6, share=True, timeout=2.5))
    failed = [g for g in got if isinstance(g, BaseException)]
    assert len(got) - len(failed) == PACE_AT_ONCE + 3
    assert failed and all(isinstance(g, ResourceExhausted) and g.reason == "RATE_LIMITED" for g in failed)
    # Within its rate, so not "rate limit exceeded": the message says the burst was paced.
    assert all("sustained rate while other tenants call" in str(g) for g in failed)


def test_a_paced_call_cancelled_while_it_waits_gives_its_place_back() -> None:
    clock = Clock()
    bucket = RateLimiter(rate=10.0, burst=1000, clock=clock)
    step = 1 / (10.0 * PACE_RATE)
    for _ in range(PACE_AT_ONCE + 1):
        assert bucket.pace("acme") == 0.0
    waits = [bucket.pace("acme", cost=2) for _ in range(10)]  # 20 places, 0.1 to 1.9 s

    async def cancelled() -> None:
        sleeping = [asyncio.create_task(bucket.paced("acme", 2, wait)) for wait in waits]
        await asyncio.sleep(0)
        for task in sleeping:
            task.cancel()
        await asyncio.gather(*sleeping, return_exceptions=True)

    asyncio.run(cancelled())
    assert bucket.pace("acme") == pytest.approx(step)  # as if those 10 had never come


def _gets_seen(running: RunningDealer) -> tuple[float, float]:
    """GetHand calls the dealer has seen begin, and end whatever their code."""
    samples = scrape(running).items()
    method = ("method", "GetHand")
    began = sum(v for (name, ls), v in samples if name == "fairdeck_rpcs_started_total" and method in ls)
    return began, sum(v for (name, ls), v in samples if name == "fairdeck_rpcs_total" and method in ls)


async def _gave_up(running: RunningDealer, tokens: dict[str, str], n: int) -> object:
    """``n`` concurrent GetHand of acme's while zenith calls, given up (the client cancels them)
    once each has reached the dealer; then one more, with a 1 s deadline, while zenith still
    calls. A give-up at a fixed 0.3 s cancelled, on a slow machine, calls still queued in the
    client behind the connection's 50 streams: the dealer never saw them end, nor begin."""
    async with (
        AsyncDealerClient(running.target, api_token=tokens["acme"], retries=0) as acme,
        AsyncDealerClient(
            running.target, api_token=tokens["zenith"], retries=0, options=OWN_CONNECTION
        ) as zenith,
    ):
        hand = await acme.open_hand()
        await zenith.open_hand()
        burst = [asyncio.ensure_future(acme.get(hand.hand_id, timeout=30)) for _ in range(n)]
        await wait_for_async(
            "every call of the burst began at the dealer", lambda: _gets_seen(running)[0] >= n
        )
        for call in burst:  # the client gives up; most of the paced ones are still waiting
            call.cancel()
        await asyncio.gather(*burst, return_exceptions=True)
        await wait_for_async(  # the dealer has seen the cancellations
            "every call of the burst ended at the dealer", lambda: _gets_seen(running)[1] >= n
        )
        await zenith.open_hand()
        try:
            return await acme.get(hand.hand_id, timeout=1.0)
        except ResourceExhausted as e:
            return e


@pytest.mark.paired  # a 1 s deadline against a wait of up to 4 s
def test_calls_given_up_while_paced_do_not_hold_back_the_tenants_next_call(tmp_path: Path) -> None:
    """At 10 a second 40 calls past PACE_AT_ONCE are spread over 4 s; the client gives up on
    them once they have reached the dealer. Its next call (its bucket has 900 tokens) starts at
    once, not behind the places of calls that never ran (it was refused RATE_LIMITED for them: a
    wait of up to 4 s, less the time the burst took to reach the dealer, is past half its 1 s
    deadline). Fails without giving the places back."""
    with _dealer(tmp_path, 10.0 / PACE_RATE) as running:
        tokens = dealer_tokens(running, "acme", "zenith")
        got = asyncio.run(_gave_up(running, tokens, PACE_AT_ONCE + 40))
        paced = sample(scrape(running), "fairdeck_paced_calls_total")
    assert not isinstance(got, BaseException), got
    assert paced > 0, paced  # the burst was paced: each of its calls took a place


async def _burst_beside_a_stream(running: RunningDealer, tokens: dict[str, str], n: int) -> float:
    """``n`` concurrent GetHand of acme's while zenith's only call is a DealHands stream begun
    over a window before: how long they took."""
    async with (
        AsyncDealerClient(running.target, api_token=tokens["acme"], retries=0) as acme,
        AsyncDealerClient(
            running.target, api_token=tokens["zenith"], retries=0, options=OWN_CONNECTION
        ) as zenith,
    ):
        hand = await acme.open_hand()

        async def stream() -> None:
            async for _ in zenith.deal_hands(hand_count=100_000, close=True):
                # Read slowly: 391 chunks at 20 ms is 7.8 s at least, past the window and the
                # burst's 2 s on any machine (dealing alone would end in about 4 s here).
                await pace_async(0.02)

        dealing = asyncio.ensure_future(stream())
        await outlast_async(SHARED_WINDOW + 0.3)
        began = time.monotonic()
        got = await asyncio.gather(*(acme.get(hand.hand_id, timeout=30) for _ in range(n)))
        took = time.monotonic() - began
        assert len(got) == n and not dealing.done()  # the stream ran all along
        dealing.cancel()
        await asyncio.gather(dealing, return_exceptions=True)
        return took


@pytest.mark.serial  # a stream beside the burst: CPU
def test_a_burst_is_paced_while_another_tenants_stream_runs(tmp_path: Path) -> None:
    """A DealHands stream takes no admission slot, so it was never seen: a tenant whose only
    call is a long stream did not count as another tenant calling, and acme's burst was served
    at once beside it (0.1 s instead of 2). Fails without the stream being seen."""
    past, rate = 40, 20.0
    with _dealer(tmp_path, rate) as running:
        tokens = dealer_tokens(running, "acme", "zenith")
        took = asyncio.run(_burst_beside_a_stream(running, tokens, PACE_AT_ONCE + past))
    assert took >= past / (rate * PACE_RATE) - 0.1
