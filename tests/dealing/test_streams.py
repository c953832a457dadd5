"""DealHands cannot escape the open-hands cap nor make the dealer work for a caller
that does not read, and no call is dropped unseen (under a burst, calls ended CANCELLED).

All on a real dealer on 127.0.0.1:0 through the real SDK.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient
from fairdeck.client.exceptions import ResourceExhausted
from fairdeck_server.dealing.bulk import BATCH_CHUNK, STREAM_IN_FLIGHT
from tests.support.connections import OWN_CONNECTION, connections_for
from tests.support.dealers import RunningDealer
from tests.support.ops import sample, scrape_until
from tests.support.waits import wait_for

# The cap is held to counts (hands open), which a busy machine does not change: it runs beside
# others. The burst is serial: its calls must be answered within their 60 s and gRPC core's 30 s
# for a call no handler took up yet. The unread stream is serial: it takes a log that has not
# grown for a second as the dealer waiting on its reader, which a starved dealer could also show.


def _log_size_when_still(running: RunningDealer, timeout: float = 20) -> int:
    """The log's size once it has stopped growing for a second (or the timeout passed)."""
    assert running.server is not None
    storage = running.server.storage
    last, since = -1, time.monotonic()

    def still() -> bool:
        nonlocal last, since
        size: int = running._run(storage.log_size())
        if size != last:
            last, since = size, time.monotonic()
            return False
        return time.monotonic() - since >= 1.0

    wait_for("the log to stop growing for a second", still, timeout=timeout, every=0.1)
    return last


# -- under a burst, calls ended CANCELLED with no reason, uncounted ---------------------------


@pytest.mark.serial
def test_cancelled_without_reason_under_2500_concurrent_gets(tmp_path: Path) -> None:
    """gRPC core dropped calls queued past its pending-request limit (1,000 to 3,000)
    before any handler saw them: CANCELLED, no reason, in no metric. Over 50 connections of
    their own: on one, the dealer saw 50 at a time (its streams per connection), the client
    queued the rest, and the test passed with gRPC's default limit back."""
    calls = 2_500

    async def many_gets(target: str) -> list[object]:
        clients = [
            AsyncDealerClient(target, timeout=60, options=OWN_CONNECTION)
            for _ in range(connections_for(calls))
        ]
        try:
            hand = await clients[0].open_hand()
            gets = (clients[i % len(clients)].get(hand.hand_id) for i in range(calls))
            return await asyncio.gather(*gets, return_exceptions=True)
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))

    with RunningDealer(tmp_path / "d", rate_limit=0, metrics_listen="127.0.0.1:0") as running:
        results = asyncio.run(many_gets(running.target))
        failed = [r for r in results if isinstance(r, BaseException)]
        assert not failed, {(type(r).__name__, getattr(r, "code", None)) for r in failed}
        labels = {"service": "fairdeck.v1.DealerService", "method": "GetHand"}
        samples = scrape_until(
            running, lambda s: sample(s, "fairdeck_rpcs_total", code="OK", **labels) >= calls
        )
        assert sample(samples, "fairdeck_rpcs_total", code="OK", **labels) == calls


# -- DealHands escaped the open-hands cap, and kept dealing to a caller that did not read -----


def test_deal_hands_with_close_holds_hands_against_the_cap_while_it_runs(tmp_path: Path) -> None:
    limit = STREAM_IN_FLIGHT + 100
    with RunningDealer(tmp_path / "d", max_open_hands=limit, rate_limit=0) as running:
        reader = DealerClient(running.target)
        first = reader.deal_hands("short", 100_000, close=True)
        next(first)  # the call runs, unread: it holds STREAM_IN_FLIGHT hands
        with DealerClient(running.target) as c:
            with pytest.raises(ResourceExhausted) as refused:
                next(iter(c.deal_hands("short", 100_000, close=True)))
            assert refused.value.reason == "TOO_MANY_OPEN_HANDS"
            assert c.open_hand().commit_receipt.index >= 0  # what is left of the cap still serves
            reader.close()  # the first call ends: what it held is released

            def dealt() -> bool:
                try:
                    return len(list(c.deal_hands("short", 1_000, close=True))) == 1_000
                except ResourceExhausted:
                    return False

            wait_for("the ended call's hands to be released", dealt, every=0.2)


@pytest.mark.paired  # a bound in chunks, over waits of the reader
def test_an_unread_stream_stops_producing_and_resumes_when_read(tmp_path: Path) -> None:
    """The handler awaits each write, and the dealer builds at most one chunk ahead, so
    a stream nobody reads makes no more hands than the transport's window holds.

    The client turns off gRPC's bandwidth-delay probing, which on loopback grows its
    receive window to megabytes (about 25,000 hands a stream): with the fixed 64 KiB
    window, the bound is a few chunks whatever the machine. 5,000 hands are 20 chunks, over
    three times the bound: a stream that made its hands ahead of its reader made them all.
    """
    count = 5_000
    config = {"rate_limit": 0, "max_open_hands": 0, "default_deadline": 120}
    with (
        RunningDealer(tmp_path / "d", **config) as running,
        DealerClient(running.target, options=[("grpc.http2.bdp_probe", 0)]) as c,
    ):
        hands = c.deal_hands("standard", count, close=True)
        received = [next(hands)]
        made = _log_size_when_still(running) // 2  # a commit and a reveal per hand
        # One chunk read, about one in the 64 KiB window (a chunk is ~43 KB), one being
        # written, one stored ahead, and room for one more in socket buffers.
        assert made <= 6 * BATCH_CHUNK, f"{made} hands made for a caller that read one"
        received.extend(hands)
        assert len(received) == count
        assert len({h.hand_id for h in received}) == count
        assert _log_size_when_still(running) == 2 * count
