"""Every way the dealer says no: to a request (``DealerError``), or to starting (``StartupRefused``).

A ``DealerError`` carries a canonical status (``Status``, named as ``grpc.StatusCode`` names
it) and a stable reason from the error contract in ``fairdeck.wire``; the gRPC edge translates
it at one boundary. Refusals are built by the named constructors below, so no other module
spells a reason. A ``StartupRefused`` is one line for the operator, naming the file or option
and the fix. No message ever holds a secret. A leaf module: no grpc, nothing of the package.
"""

from __future__ import annotations

import enum

from fairdeck.wire import AUTHORIZATION, STATUS, Reason


class Status(enum.Enum):
    """A canonical status code, by the name ``grpc.StatusCode`` gives it."""

    INVALID_ARGUMENT = enum.auto()
    NOT_FOUND = enum.auto()
    ALREADY_EXISTS = enum.auto()
    FAILED_PRECONDITION = enum.auto()
    RESOURCE_EXHAUSTED = enum.auto()
    DEADLINE_EXCEEDED = enum.auto()
    UNAVAILABLE = enum.auto()
    INTERNAL = enum.auto()
    UNAUTHENTICATED = enum.auto()
    PERMISSION_DENIED = enum.auto()
    UNIMPLEMENTED = enum.auto()


class DealerError(Exception):
    """A request the dealer refuses. The message must never contain a secret.

    The status is the one the contract gives the reason (``fairdeck.wire.STATUS``);
    ``retry_delay`` (seconds) becomes a google.rpc.RetryInfo.
    """

    def __init__(
        self, reason: Reason, message: str, field: str | None = None, retry_delay: float | None = None
    ) -> None:
        super().__init__(message)
        self.reason = Reason(reason)  # a reason outside the contract is a bug: ValueError here
        self.status = Status[STATUS[self.reason]]
        self.field = field
        self.retry_delay = retry_delay


def invalid(field: str, reason: Reason, message: str) -> DealerError:
    return DealerError(reason, f"{field}: {message}", field)


def hand_not_found() -> DealerError:
    # The same answer for a hand that does not exist and one of another tenant.
    return DealerError(Reason.HAND_NOT_FOUND, "hand not found", "hand_id")


def entry_not_found(field: str, message: str) -> DealerError:
    return DealerError(Reason.ENTRY_NOT_FOUND, message, field)


def no_checkpoint(size: int, field: str) -> DealerError:
    return DealerError(Reason.NO_CHECKPOINT, f"no signed checkpoint for tree size {size}", field)


def precondition(reason: Reason, message: str) -> DealerError:
    return DealerError(reason, message)


def hand_closed() -> DealerError:
    return precondition(Reason.HAND_CLOSED, "the hand is closed")


def hand_already_shuffled() -> DealerError:
    return precondition(Reason.HAND_ALREADY_SHUFFLED, "the hand is already shuffled; seeds are fixed")


def hand_not_closed() -> DealerError:
    return precondition(Reason.HAND_NOT_CLOSED, "the hand is not closed; its seed is still secret")


def not_enough_cards(left: int, requested: int) -> DealerError:
    return precondition(Reason.NOT_ENOUGH_CARDS, f"{left} cards left, {requested} requested")


def wrong_position(position: int, expected: int) -> DealerError:
    return DealerError(
        Reason.WRONG_POSITION,
        f"the hand is at deck position {position}, not {expected}: another draw came first",
        "expected_position",
    )


def request_id_reused() -> DealerError:
    return DealerError(
        Reason.REQUEST_ID_REUSED,
        "request_id was already used for a different request (kind of open, deck or seeds)",
        "request_id",
    )


def rate_limited(delay: float) -> DealerError:
    return DealerError(Reason.RATE_LIMITED, "rate limit exceeded; slow down", retry_delay=delay)


def paced_past_deadline(delay: float) -> DealerError:
    """RATE_LIMITED for a call within its rate whose paced start (limits.RateLimiter.pace)
    would come after half its deadline: the reason is the rate's, the message says why."""
    return DealerError(
        Reason.RATE_LIMITED,
        "the tenant's burst is started at its sustained rate while other tenants call, and this "
        "call's turn would come after half its deadline; retry after the RetryInfo delay, or give "
        "it a longer deadline (a longer one than the server's default deadline does not help)",
        retry_delay=delay,
    )


def too_many_open_hands(limit: int, delay: float) -> DealerError:
    return DealerError(
        Reason.TOO_MANY_OPEN_HANDS,
        f"at most {limit} open hands per tenant; close some first",
        retry_delay=delay,
    )


def too_many_calls(limit: int, delay: float) -> DealerError:
    return DealerError(
        Reason.TOO_MANY_CALLS,
        f"at most {limit} calls in flight per tenant; wait for some to finish",
        retry_delay=delay,
    )


def too_many_streams(limit: int, delay: float) -> DealerError:
    return DealerError(
        Reason.TOO_MANY_STREAMS,
        f"at most {limit} DealHands streams at once per tenant; wait for one to end",
        retry_delay=delay,
    )


def too_many_open_streams(limit: int, delay: float) -> DealerError:
    return DealerError(
        Reason.TOO_MANY_STREAMS,
        f"at most {limit} health Watch and reflection streams at once per client address; "
        "wait for one to end",
        retry_delay=delay,
    )


def codealer_busy(limit: int, delay: float) -> DealerError:
    return DealerError(
        Reason.TOO_MANY_CALLS,
        f"at most {limit} calls in flight at the co-dealer; wait for some to finish",
        retry_delay=delay,
    )


def codealer_missing_token() -> DealerError:
    return DealerError(
        Reason.MISSING_CREDENTIALS,
        "this co-dealer answers only its dealer: send its token (authorization: Bearer ...; "
        "fairdeck serve --codealer-token @FILE)",
        AUTHORIZATION,
    )


def codealer_invalid_token() -> DealerError:
    return DealerError(
        Reason.INVALID_TOKEN,
        "not this co-dealer's dealer token (fairdeck serve --codealer-token @FILE)",
        AUTHORIZATION,
    )


def unknown_method() -> DealerError:
    # No echo of the method name: it is the caller's text.
    return DealerError(Reason.UNKNOWN_METHOD, "this dealer does not serve that method")


def auth_rate_limited(delay: float) -> DealerError:
    return DealerError(
        Reason.AUTH_RATE_LIMITED,
        "too many failed authentications from this address; retry later",
        AUTHORIZATION,
        retry_delay=delay,
    )


def deadline_exceeded(seconds: float) -> DealerError:
    return DealerError(
        Reason.DEADLINE_EXCEEDED, f"the call ran longer than the server's default deadline ({seconds:g} s)"
    )


def stream_ran_too_long(seconds: float) -> DealerError:
    return DealerError(
        Reason.DEADLINE_EXCEEDED,
        f"the stream ran longer than the server lets one stream run ({seconds:g} s in all, however "
        "it keeps writing): read it faster, or ask for fewer hands per call",
    )


def stream_stalled(seconds: float) -> DealerError:
    return DealerError(
        Reason.DEADLINE_EXCEEDED,
        f"the stream wrote nothing for the server's default deadline ({seconds:g} s): "
        "its reader stopped reading, or its next response never came",
    )


def storage_unavailable(message: str) -> DealerError:
    return DealerError(Reason.STORAGE_UNAVAILABLE, message)


def seed_unavailable(message: str) -> DealerError:
    return DealerError(Reason.SEED_UNAVAILABLE, message)


def hand_unreadable(hand_id: str, column: str) -> DealerError:
    """A stored hand whose row cannot be read: named by its id and the column, never its content."""
    return DealerError(
        Reason.HAND_UNREADABLE,
        f"stored hand {hand_id} cannot be read (column {column} is damaged); the dealer's log says more",
    )


def internal() -> DealerError:
    # A fixed message: whatever went wrong stays in the server's log.
    return DealerError(Reason.INTERNAL, "internal error")


def missing_credentials() -> DealerError:
    return DealerError(
        Reason.MISSING_CREDENTIALS,
        "this dealer requires an API token (authorization: Bearer ...) or a client certificate",
        AUTHORIZATION,
    )


def invalid_token() -> DealerError:
    # One answer for unknown, revoked and garbled tokens.
    return DealerError(Reason.INVALID_TOKEN, "invalid API token", AUTHORIZATION)


def invalid_certificate(message: str) -> DealerError:
    return DealerError(Reason.INVALID_CERTIFICATE, message)


def role_not_allowed(role: str, method: str) -> DealerError:
    return DealerError(Reason.ROLE_NOT_ALLOWED, f"the {role} role may not call {method}")


RESTORE = (
    "restore it from a backup no older than the latest checkpoint anyone may hold (an older copy of a "
    'log with published checkpoints is a fork: docs/operations.md, "Restoring a backup")'
)
"""The only advice to restore a database, wherever it is given: never without the fork warning."""


class StartupRefused(Exception):
    """The dealer (or an admin command) refuses to start; the message is the one line the
    operator sees, printed with exit status 2. Every start-up refusal is one of these (the key,
    TLS, listen and configuration errors subclass it).

    Text from elsewhere in it (SQLite's quick_check report, an OS error) may hold
    newlines; they are folded here, so the message is one line whoever built it.

    >>> str(StartupRefused("damaged (*** in database main ***\\nPage 22: error)"))
    'damaged (*** in database main *** Page 22: error)'
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def codeal(reason: Reason, message: str, field: str | None = None) -> DealerError:
    """A refusal of a co-dealt call, by the dealer or by the co-dealer (docs/api.md)."""
    return DealerError(reason, message, field)
