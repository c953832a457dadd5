"""Waiting in tests, one way. ``wait_for`` (``wait_for_async`` on a loop) polls a condition until
it holds or a deadline passes, and then fails naming what it waited for: no test waits a fixed
time for something to happen, which is too short on a loaded machine and too long elsewhere.

The only fixed stretches of time are those a test is about, each said by its name: ``hold_silent``
(a caller or reader that does nothing for that long: a stopped reader, a silent client),
``outlast`` (let real time pass that a rule of the dealer or the auditor measures: a reread
interval, a rate window, a lifetime) and ``pace`` (spacing a load generator's or a client's calls).
tests/test_house.py allows time.sleep and asyncio.sleep only in this module, and
``asyncio.sleep(0)`` anywhere: one turn of the event loop, which waits on no clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 20.0
"""How long a wait for something that must happen may take: generous, never a timing bar."""
EVERY_S = 0.05


def wait_for(what: str, condition: Callable[[], T], timeout: float = WAIT_S, every: float = EVERY_S) -> T:
    """Poll ``condition()`` until it is truthy; its value. Past ``timeout`` s: AssertionError
    naming ``what`` (and the last value seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what} (last: {value!r})"
        time.sleep(every)


async def wait_for_async(
    what: str, condition: Callable[[], T | Awaitable[T]], timeout: float = WAIT_S, every: float = EVERY_S
) -> T:
    """``wait_for`` on an event loop: ``condition`` may be a plain or an async function."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what} (last: {value!r})"
        await asyncio.sleep(every)


def hold_silent(seconds: float) -> None:
    """Do nothing for ``seconds``: the silence of a caller, a reader or a stand-in server is what
    the test is about."""
    time.sleep(seconds)


async def hold_silent_async(seconds: float) -> None:
    """``hold_silent`` on an event loop (other tasks run meanwhile)."""
    await asyncio.sleep(seconds)


def outlast(seconds: float) -> None:
    """Let ``seconds`` of real time pass: an interval a rule of the dealer or the auditor
    measures (a reread, a rate window, a lifetime) has run out, which is what the test is about."""
    time.sleep(seconds)


async def outlast_async(seconds: float) -> None:
    """``outlast`` on an event loop (other tasks run meanwhile)."""
    await asyncio.sleep(seconds)


def pace(seconds: float) -> None:
    """Space a load generator's or a client's calls by ``seconds``."""
    time.sleep(seconds)


async def pace_async(seconds: float) -> None:
    """``pace`` on an event loop."""
    await asyncio.sleep(seconds)
