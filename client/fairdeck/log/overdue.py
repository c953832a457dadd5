"""When a hand is overdue, judged by the log's own clock (docs/log-format.md, "Overdue hands").

A commitment with no reveal is overdue only when the log holds a *later* entry, other than a void
of an overdue hand, timestamped more than the lifetime after it: the dealer kept dealing while it
withheld the reveal, which is what deck shopping needs. The auditor's own clock plays no part, so
a dealer whose clock is slow, a dealer that was stopped, and a log read long after it was written
are judged alike. An open hand with nothing clock-advancing after it is *pending*.

Pure and streaming: ``tick(index, time_ms)`` for each entry that advances the clock, in log order,
then ``latest_after(index)``. Entry times need not be in order (an older dealer's log may have
them out of order): the rule takes the largest time after the commitment.

>>> clock = LogClock()
>>> for index, t in [(0, 1_000), (1, 1_500), (2, 1_200), (3, 1_100)]:
...     clock.tick(index, t)
>>> clock.latest_after(0), clock.latest_after(1), clock.latest_after(3), clock.latest
(1500, 1200, None, (1, 1500))
"""

from __future__ import annotations

from bisect import bisect_right


class LogClock:
    """The largest entry time after any index, in O(log n), with memory that stays at one pair
    while times only grow (a monotone stack: indexes rising, times falling)."""

    __slots__ = ("_indexes", "_times", "latest")

    def __init__(self) -> None:
        self._indexes: list[int] = []
        self._times: list[int] = []
        self.latest: tuple[int, int] | None = None
        """(index, time) of the entry with the largest time so far (the first of equals)."""

    def tick(self, index: int, time_ms: int) -> None:
        """Entry ``index`` (larger than any before) advances the clock to ``time_ms``."""
        while self._times and self._times[-1] <= time_ms:
            self._times.pop()
            self._indexes.pop()
        self._indexes.append(index)
        self._times.append(time_ms)
        if self.latest is None or time_ms > self.latest[1]:
            self.latest = (index, time_ms)

    def latest_after(self, index: int) -> int | None:
        """The largest time of an entry after ``index``; None when there is none."""
        at = bisect_right(self._indexes, index)
        return self._times[at] if at < len(self._times) else None


def is_overdue(commit_ms: int, later_ms: int | None, lifetime_ms: int) -> bool:
    """Whether a hand committed at ``commit_ms``, still unrevealed, is overdue when the latest
    clock-advancing entry after it is at ``later_ms``: strictly more than the lifetime later."""
    return later_ms is not None and later_ms - commit_ms > lifetime_ms
