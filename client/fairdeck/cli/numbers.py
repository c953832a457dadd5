"""argparse types for the client commands' numeric options, each held to the range of what it feeds.

A gRPC deadline, a count of processes, the log's millisecond times: NaN, infinity, a negative or
a huge value is refused by argparse (exit 2, the option named with its range), never passed on
to end in a traceback or in a call that fails as if the dealer had (a --timeout of 0 or NaN used to
come back as the dealer's DEADLINE_EXCEEDED).

>>> seconds(3600)("2.5")
2.5
>>> whole(0, 256)("300")
Traceback (most recent call last):
argparse.ArgumentTypeError: must be a whole number from 0 to 256, not '300'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["DAY", "MAX_BATCH_HANDS", "MAX_HAND_LIFETIME", "MAX_PROCESSES", "lifetime", "seconds", "whole"]

DAY = 86_400.0
MAX_HAND_LIFETIME = 365 * DAY
"""The dealer's own bound on --max-hand-lifetime (server option_ranges.py)."""
MAX_BATCH_HANDS = 100_000
"""The most hands one DealHands call deals (the dealer's limit); a lab batch of more never ends
and cannot be interrupted (it stops after the batch in flight)."""
MAX_PROCESSES = 256
"""More worker processes than this is a typo, not a machine."""


def _shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def seconds(most: float, *, least: float = 0.0) -> Callable[[str], float]:
    """A duration over ``least`` (or at ``least`` when it is positive) and at most ``most``."""
    span = f"from {_shown(least)} to" if least > 0 else "over 0 and at most"
    expected = f"must be a number of seconds {span} {_shown(most)}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, not {text!r}") from None
        in_range = least <= value <= most if least > 0 else 0 < value <= most
        if not math.isfinite(value) or not in_range:  # comparisons with NaN are all False
            raise argparse.ArgumentTypeError(f"{expected}, not {text!r}")
        return value

    return parse


def whole(least: int, most: int) -> Callable[[str], int]:
    """A whole number from ``least`` to ``most`` (``1_000`` and ``1,000`` read as 1000)."""
    expected = f"must be a whole number from {least} to {most}"

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, not {text!r}") from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{expected}, not {text!r}")
        return value

    return parse


lifetime = seconds(MAX_HAND_LIFETIME, least=0.001)
"""--max-hand-lifetime: the log's times are milliseconds, so 1 ms is the least it can say."""
