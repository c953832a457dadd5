"""The dealer's clock: the time it writes into the log, kept honest (docs/operations.md, "The dealer's
clock").

- ``DealerClock.now_ms`` is the wall clock read once at start, advanced by the monotonic clock, so
  a wall-clock step moves neither entry times nor lifetimes while the process runs.
- ``DealerClock.step`` reports a wall-clock step (a difference that moves by more than
  ``STEP_TOLERANCE_MS``) once, by the caller's log line and metric.
- ``start_after_log``: a wall clock behind the log's latest entry at start is refused unless the
  operator allows it (then time starts at that entry's); within the tolerance it starts there.

Entry times never go backwards within a log: the storage writers take ``max(time, last entry's
time)`` as they append (``fairdeck.log.logentry.TIME_AT``), across processes and replicas too.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

from fairdeck_server.refusals import StartupRefused

STEP_TOLERANCE_MS = 1000
"""A wall clock that moves more than this against the monotonic clock has stepped."""
CHECK_INTERVAL_S = 1.0
"""How often the wall clock is compared (app.py)."""
WITNESS_SKEW_S = 10
"""A witness's cosignature timestamp further than this from the dealer's clock is a warning: the
witness answers within its request timeout (3 s), so one of the two clocks is wrong."""


class DealerClock:
    """Milliseconds since the epoch on the monotonic clock, anchored to the wall clock at start."""

    def __init__(
        self, wall_ns: Callable[[], int] = time.time_ns, mono_ns: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self._wall_ns = wall_ns
        self._mono_ns = mono_ns
        self._base_ms = wall_ns() // 1_000_000
        self._base_mono = mono_ns()
        self.offset_ms = 0
        """The wall clock minus this clock, as last reported (a step moves it)."""

    def now_ms(self) -> int:
        return self._base_ms + (self._mono_ns() - self._base_mono) // 1_000_000

    def wall_ms(self) -> int:
        return self._wall_ns() // 1_000_000

    def not_before(self, ms: int) -> None:
        """Run from ``ms`` on if this clock is behind it (the log's latest entry)."""
        now = self.now_ms()
        if ms > now:
            self._base_ms += ms - now
        self.offset_ms = self.wall_ms() - self.now_ms()

    def step(self) -> int | None:
        """How far the wall clock stepped since the last step reported, in ms (positive: forward),
        when that is beyond the tolerance; None otherwise."""
        offset = self.wall_ms() - self.now_ms()
        if abs(offset - self.offset_ms) <= STEP_TOLERANCE_MS:
            return None
        step, self.offset_ms = offset - self.offset_ms, offset
        return step


def start_after_log(clock: DealerClock, latest: tuple[int, int] | None, *, allow_behind: bool) -> str | None:
    """Check the clock against the log's latest entry, (index, time_ms), at start.

    A clock behind it by more than the tolerance is refused (StartupRefused naming both times)
    unless ``allow_behind``: then the dealer's time starts at the entry's, and the warning to log
    is returned. Within the tolerance the dealer's time starts there without a word.
    """
    if latest is None:
        return None
    index, entry_ms = latest
    now = clock.now_ms()
    behind = entry_ms - now
    if behind <= 0:
        return None
    if behind > STEP_TOLERANCE_MS and not allow_behind:
        raise StartupRefused(
            f"this machine's clock says {iso(now)}, but the log's latest entry (index {index}) is from "
            f"{iso(entry_ms)}, {behind / 1000:.1f} s later: entries written now would go back in time. "
            "Fix the clock (check NTP) and start again; or, if the log's time is the right one, start "
            "with --allow-clock-behind-log to continue from its latest entry"
        )
    clock.not_before(entry_ms)
    if behind <= STEP_TOLERANCE_MS:
        return None
    return (
        f"the clock is {behind / 1000:.1f} s behind the log's latest entry (index {index}, {iso(entry_ms)}); "
        "--allow-clock-behind-log: the log's time continues from that entry and runs ahead of this "
        "clock until the dealer restarts with the clock right"
    )


def iso(ms: int) -> str:
    """A time in ms since the epoch, as ISO 8601 UTC to the millisecond."""
    try:
        when = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return f"time_ms {ms}"
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
