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

__all__ = [
    "DAY",
    "MAX_BATCH_HANDS",
    "MAX_DECKS",
    "MAX_HAND_LIFETIME",
    "MAX_NIST_BITS",
    "MAX_NIST_READ",
    "MAX_NIST_SEQUENCES",
    "MAX_PROCESSES",
    "MAX_RAW_BYTES",
    "MAX_SAMPLE",
    "lifetime",
    "seconds",
    "whole",
]

DAY = 86_400.0
MAX_HAND_LIFETIME = 365 * DAY
"""The dealer's own bound on --max-hand-lifetime (server option_ranges.py)."""
MAX_BATCH_HANDS = 100_000
"""The most hands one DealHands call deals (the dealer's limit); a lab batch of more never ends
and cannot be interrupted (it stops after the batch in flight)."""
MAX_PROCESSES = 256
"""More worker processes than this is a typo, not a machine."""
MAX_DECKS = 1_000_000_000
"""``stats -n`` and ``--small-decks``: each source holds an 8-byte hash per deck for the duplicate
test until its last chunk (8 GB here, per source in flight), and ours costs about 11 us of CPU a
deck; with ``--target`` every deck is two entries of a live log, for good."""
MAX_NIST_BITS = 100_000_000
"""``lab test --nist-bits``: the spectral test's FFT holds about 24 bytes per bit (2.4 GB here)."""
MAX_NIST_SEQUENCES = 1_000_000
"""``lab test --nist-sequences``: as many as the raw output holds, up to this."""
MAX_NIST_READ = 1 << 30
"""What ``lab test`` reads of each NIST source into memory (sequences x bits / 8, at most the
file): five sources at once (ours two, the bad generators three)."""
MAX_SAMPLE = 1_000_000_000
"""``lab test --sample``: hands re-derived one by one; for more, re-derive all (no --sample)."""
MAX_RAW_BYTES = 1 << 50
"""``lab collect --raw-bytes``: 1 PiB, a thousand times what TestU01's BigCrush reads: past it, a
typo (and the hands a collection counts stay far from any integer's end)."""


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
