"""What each numeric option of ``fairdeck serve`` may be, set by what its value feeds.

gRPC takes durations as 32-bit milliseconds and sizes as 32-bit ints; a token bucket turns its
burst into a float; the supervisor judges a worker by its heartbeat. A value outside its
``Range`` would crash in one of them (an OverflowError traceback) or run badly (a worker timeout
below the heartbeat kills healthy workers), so config.load refuses it first, the same from a
flag, the environment or the file. Invariant: every int and float option has a Range here
(tests/run/test_option_ranges.py); docs/operations.md ("Ranges") lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CODEALER_RANGES",
    "GRPC_INT_MAX",
    "HEARTBEAT_SECONDS",
    "RANGES",
    "WORKER_TIMEOUT_MIN",
    "Range",
    "shown",
]

GRPC_INT_MAX = 2**31 - 1
"""gRPC's channel arguments are C ints: sizes in bytes, durations in milliseconds."""
GRPC_SECONDS_MAX = GRPC_INT_MAX / 1000
"""The longest duration gRPC takes (24.8 days), in seconds."""
HEARTBEAT_SECONDS = 0.5
"""How often a worker of ``--processes N`` tells its supervisor it is alive (app.py)."""
WORKER_TIMEOUT_MIN = 4 * HEARTBEAT_SECONDS
"""A worker timeout shorter than a few heartbeats kills workers that are only busy."""
DAY = 86_400.0
YEAR = 365 * DAY
MIN_MESSAGE_BYTES = 64 * 1024
"""Below this, ordinary calls (a hand with its proof, a page of the log) no longer fit."""
MS = 0.001
"""The shortest positive duration: options that feed milliseconds cannot say less."""
CONNECTION_MIN = 0.1
"""A connection given less than this to shake hands, or to live, is closed before an honest
client's first call on a slow network."""


def shown(value: float) -> str:
    """A bound as people write it: 2147483.647, 86400, 0.001 (never 2.14748e+06)."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


@dataclass(frozen=True)
class Range:
    """``low`` to ``high`` inclusive; with ``off``, 0 is also allowed and turns the option off."""

    low: float
    high: float
    unit: str = ""
    off: str = ""
    """What 0 means, when 0 is allowed below ``low`` ("no limit", "never", ...)."""
    why: str = ""
    """Why the bounds are where they are, when the range alone does not say."""

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        span = f"from {shown(self.low)} to {shown(self.high)}{unit}"
        return f"0 ({self.off}) or {span}" if self.off else span

    def check(self, value: float) -> None:
        """Raise ValueError naming the range unless ``value`` is in it."""
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"must be {self.describe()}, not {value}")
        if self.off and value == 0:
            return
        if not self.low <= value <= self.high:
            why = f" ({self.why})" if self.why else ""
            raise ValueError(f"must be {self.describe()}, not {shown(value)}{why}")


GRPC_MS = "gRPC's limit: 2^31-1 ms"

RANGES: dict[str, Range] = {
    # Durations that gRPC takes in milliseconds (edge/transport.py): at most GRPC_SECONDS_MAX.
    "handshake_timeout": Range(CONNECTION_MIN, GRPC_SECONDS_MAX, "seconds", why=GRPC_MS),
    "connection_idle_timeout": Range(CONNECTION_MIN, GRPC_SECONDS_MAX, "seconds", "no limit", GRPC_MS),
    "max_connection_age": Range(CONNECTION_MIN, GRPC_SECONDS_MAX, "seconds", "no limit", GRPC_MS),
    # The connection age's grace is (STREAM_RUNS + 1) default deadlines, also milliseconds.
    "default_deadline": Range(MS, DAY, "seconds", off="no limit"),
    # Sizes that gRPC takes as ints.
    "max_message_bytes": Range(
        MIN_MESSAGE_BYTES, GRPC_INT_MAX, "bytes", "no limit", "gRPC's limit: 2^31-1 bytes"
    ),
    "max_request_bytes": Range(MIN_MESSAGE_BYTES, GRPC_INT_MAX, "bytes", off="no limit of its own"),
    "max_connections": Range(1, 2**20, off="no limit"),  # also the file descriptor limit (fs.nr_open)
    "max_connections_per_peer": Range(1, 2**20, off="no limit"),
    # Timers of our own (asyncio), and the log's millisecond timestamps.
    "grace_seconds": Range(0, DAY, "seconds"),
    "checkpoint_interval": Range(MS, 3600, "seconds"),
    "max_hand_lifetime": Range(MS, YEAR, "seconds"),
    "witness_interval": Range(MS, DAY, "seconds"),
    "worker_timeout": Range(
        WORKER_TIMEOUT_MIN,
        DAY,
        "seconds",
        off="never",
        why=f"a worker beats every {shown(HEARTBEAT_SECONDS)} s; less than "
        f"{shown(WORKER_TIMEOUT_MIN / HEARTBEAT_SECONDS)} beats kills busy, healthy workers",
    ),
    # Token buckets (floats) and counts.
    "rate_limit": Range(MS, 1e6, "per second", off="off"),
    "rate_burst": Range(0, 10**9),
    "auth_failure_rate": Range(MS, 1e6, "per second", off="off"),
    "auth_failure_burst": Range(0, 10**9),
    "max_open_hands": Range(1, 10**9, off="no limit"),
    "max_calls_in_flight": Range(1, 10**6, off="no limit"),
    "max_streams": Range(1, 10**6, off="no limit"),
    "max_streams_per_connection": Range(1, GRPC_INT_MAX, off="no limit"),  # HTTP/2's, a C int in gRPC
    "max_open_streams_per_peer": Range(1, 10**6, off="no limit"),
    "db_pool_size": Range(2, 1000),  # PostgreSQL's own max_connections is rarely above a few hundred
    "witness_threshold": Range(0, 256),
    "processes": Range(1, 256),  # a typo (100000) would fork until the machine stops
    # Each pooled deck is two shuffles with proofs (tens of ms of CPU) and rows at both parties.
    "codeal_pool": Range(1, 1024, "decks", off="no pool: each co-dealt open shuffles its deck then"),
}

CODEALER_RANGES: dict[str, Range] = {
    # ``fairdeck codealer serve``: days its ledger keeps a hand after the hand ended (RevealSeed).
    "keep_closed_days": Range(
        1,
        36_500,
        "days",
        off="keep every hand",
        why="the dealer asks about an ended hand again only while it retries its close; a day covers it",
    ),
    # ``fairdeck codealer serve``: seconds after its announce a hand not ended is ended by the
    # co-dealer. At least twice the dealer's own lifetime (a pooled deck waits one lifetime, then
    # lives one as a hand), so at most twice the dealer's bound.
    "max_hand_lifetime": Range(1, 2 * YEAR, "seconds"),
    # ``fairdeck codealer serve``: seconds after a hand's last sealed share its seed is answered without
    # its seats' releases (spec 9.3). Never 0: an abandoned hand must still be voidable.
    "reveal_hold": Range(1, 2 * YEAR, "seconds"),
}
"""The co-dealer's numeric options (cli/codealer_command.py), checked the same way."""
