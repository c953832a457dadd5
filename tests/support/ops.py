"""Shared by the operations tests: real dealers with any config, a scrape of
their /metrics over loopback HTTP, dealer tokens for tenants, the RetryInfo of a refused
call, and a clock the tests move."""

from __future__ import annotations

import contextlib
import io
import logging
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from google.rpc import error_details_pb2, status_pb2
from prometheus_client.parser import text_string_to_metric_families

from fairdeck.client.exceptions import FairdeckError
from fairdeck.wire import STATUS_DETAILS_KEY
from fairdeck_server.observe.logging_setup import CallFilter, JsonFormatter
from fairdeck_server.policy.auth import new_token
from fairdeck_server.principal import Role
from tests.support.dealers import RunningDealer
from tests.support.waits import hold_silent, wait_for

T = TypeVar("T")


class Clock:
    """A monotonic clock that stands still until a test moves ``now``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def dealer_tokens(running: RunningDealer, *tenants: str) -> dict[str, str]:
    """A dealer token for each tenant, stored in the running dealer."""
    tokens = {}
    for tenant in tenants:
        token, record = new_token(tenant, Role.DEALER)
        assert running.server is not None
        running._run(running.server.storage.put_token(record))
        tokens[tenant] = token
    return tokens


def scrape(running: RunningDealer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the dealer's /metrics, fetched over HTTP: (name, sorted labels) -> value."""
    assert running.server is not None and running.server.metrics_port
    url = f"http://127.0.0.1:{running.server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape_until(running: RunningDealer, done: Callable[[Samples], bool], timeout: float = 5) -> Samples:
    """Scrape until ``done`` holds (or the timeout passes; the caller's asserts then fail).

    A refused call's status reaches the client a moment before the dealer has
    counted it (abort sends the status, then unwinds the interceptors).
    """
    seen: list[Samples] = []

    def scraped() -> bool:
        seen[:] = [scrape(running)]
        return done(seen[0])

    with contextlib.suppress(AssertionError):  # the caller's asserts say what is missing
        wait_for("the scrape", scraped, timeout=timeout)
    return seen[0]


def sample(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """One sample's value; 0 if the series does not exist (yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def details(error: FairdeckError) -> status_pb2.Status:
    """The google.rpc.Status the dealer attached to a failed call."""
    cause: Any = error.__cause__
    for key, value in cause.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            return status_pb2.Status.FromString(value)
    raise AssertionError("no grpc-status-details-bin trailer")


def retry_delay(error: FairdeckError) -> float | None:
    """Seconds of the google.rpc.RetryInfo in the error's status details, if any."""
    for detail in details(error).details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info.retry_delay.ToNanoseconds() / 1e9
    return None


def read_stalled(stream: Iterator[T], seconds: float) -> list[T]:
    """The first response of ``stream``, then ``seconds`` in which nothing is read, then the rest:
    a reader that stopped, as the dealer sees it (its writes wait on flow control, so the
    stream's default deadline runs out). Open the channel with ``grpc.http2.bdp_probe`` 0, or
    gRPC grows the window and keeps reading for the caller meanwhile."""
    first = next(stream)
    hold_silent(seconds)
    return [first, *stream]


@contextmanager
def captured(*loggers: str) -> Iterator[io.StringIO]:
    """JSON lines of these loggers (at INFO), as ``fairdeck serve --log-format json`` writes them."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(CallFilter())
    handler.setFormatter(JsonFormatter())
    saved = []
    for name in loggers:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
    try:
        yield out
    finally:
        for logger, level in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
