"""The SDK waits out the dealer's RetryInfo on calls that are safe to repeat, and only on those
(regression: it never retried RESOURCE_EXHAUSTED, although the dealer says when to come back).
Against a real dealer whose rate limit is one call per second per tenant."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from fairdeck.client import AsyncDealerClient, DealerClient
from fairdeck.client.exceptions import ResourceExhausted
from tests.dealers import RunningDealer


@pytest.fixture
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dealer = RunningDealer(tmp_path_factory.mktemp("retries") / "data", rate_limit=2.0, rate_burst=1)
    yield dealer.start()
    dealer.close()


def test_a_safe_call_is_retried_after_the_delay_the_dealer_asks(target: str) -> None:
    with DealerClient(target) as dealer:
        first = dealer.open_hand("standard")  # the burst
        second = dealer.open_hand("standard")  # refused once, with RetryInfo; retried after it
        assert dealer.get(second.hand_id).hand_id == second.hand_id != first.hand_id


def test_without_retries_the_refusal_is_raised_with_its_delay(target: str) -> None:
    with DealerClient(target, retries=0) as dealer:
        dealer.open_hand("standard")
        with pytest.raises(ResourceExhausted) as e:
            dealer.open_hand("standard")
    assert e.value.reason == "RATE_LIMITED" and e.value.retry_delay is not None


def test_a_call_that_is_not_safe_to_repeat_is_never_retried(target: str) -> None:
    with DealerClient(target) as dealer:
        hand = dealer.open_hand("standard")  # retried if it must be: an open carries a request id
        with pytest.raises(ResourceExhausted):
            dealer.add_client_seeds(hand.hand_id, [b"x"])  # seeds twice would be two seeds


def test_a_delay_longer_than_the_limit_is_raised_at_once(target: str) -> None:
    with DealerClient(target, max_retry_delay=0.01) as dealer:
        dealer.open_hand("standard")
        with pytest.raises(ResourceExhausted):
            dealer.open_hand("standard")


def test_the_asyncio_client_retries_too(target: str) -> None:
    async def two() -> tuple[str, str]:
        async with AsyncDealerClient(target) as dealer:
            a = await dealer.open_hand("standard")
            b = await dealer.open_hand("standard")
            return a.hand_id, b.hand_id

    a, b = asyncio.run(two())
    assert a != b
