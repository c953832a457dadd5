"""What a log line says about a failure: its cause, without a secret, and once per cause.

- ``cause(e)``: a DealerError's reason and message (written for clients: never secret), an
  OSError's error and file, and for anything else the class names down its chain of causes with
  SQLite's error code name or PostgreSQL's SQLSTATE, never their text (which may quote a value:
  a seed, a token's hash). "DealerError" alone said nothing of a lock held elsewhere.
- ``Repeats``: a failure that recurs in a loop (five times a second, per worker) is logged when it
  first happens, then at most once per ``every`` seconds with how often it came meanwhile.

>>> from fairdeck_server.refusals import storage_unavailable
>>> cause(storage_unavailable("the writers' lock is held elsewhere"))
"UNAVAILABLE (STORAGE_UNAVAILABLE): the writers' lock is held elsewhere"
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from fairdeck_server.refusals import DealerError

__all__ = ["Repeats", "cause"]

DEPTH = 4
"""Causes followed down an exception's chain."""


def _one(e: BaseException) -> str:
    if isinstance(e, DealerError):
        return f"{e.status.name} ({e.reason.value}): {e}"
    if isinstance(e, OSError) and e.strerror:
        return f"{type(e).__name__}: {e.strerror}" + (f" ({e.filename})" if e.filename else "")
    code = getattr(e, "sqlite_errorname", None) or getattr(e, "sqlstate", None)
    return type(e).__name__ + (f" ({code})" if code else "")


def cause(e: BaseException) -> str:
    """``e`` and what it came from, in words safe for a log line."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen and len(parts) < DEPTH:
        seen.add(id(current))
        parts.append(_one(current))
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return ", from ".join(parts)


class Repeats:
    """Logs a message the first time, then at most once per ``every`` seconds while it recurs,
    saying how many times it came meanwhile. Keyed by the message text; a new text is logged
    at once. Remembers at most ``MOST`` texts."""

    MOST = 64

    def __init__(
        self, logger: logging.Logger, every: float = 10.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.every = every
        self.clock = clock
        self._seen: dict[str, tuple[float, int]] = {}  # text -> (when last logged, repeats since)

    def log(self, level: int, text: str) -> None:
        now = self.clock()
        last = self._seen.get(text)
        if last is not None and now - last[0] < self.every:
            self._seen[text] = (last[0], last[1] + 1)
            return
        if len(self._seen) >= self.MOST:
            self._seen.clear()
        self._seen[text] = (now, 0)
        if last is not None and last[1]:
            text += f" (and {last[1]:,} more times in the last {now - last[0]:.0f} s)"
        self.logger.log(level, "%s", text)

    def clear(self) -> None:
        """The failure stopped: the next one is logged at once."""
        self._seen.clear()
