"""SDK exceptions: one class per meaning, raised ``from`` the grpc.RpcError.

The dealer attaches a google.rpc.ErrorInfo with a stable ``reason`` to every
error (the list is ``fairdeck.wire.Reason``); ``from_rpc_error`` picks the
class by reason first (``BY_REASON`` has every reason), then by status
code. Every status code has a class of its own (``BY_CODE``), so a caller can
catch, say, ``Cancelled`` without catching everything; a reason's class is a
subclass of its code's where the two differ in meaning. Every exception
carries ``code``, ``reason`` and ``field``, and
``retry_delay`` (seconds) when the dealer sent a google.rpc.RetryInfo, as it
does with every RESOURCE_EXHAUSTED refusal.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from fairdeck.wire import STATUS, Reason


class FairdeckError(Exception):
    """A call to the dealer failed."""

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode,
        reason: str = "",
        field: str | None = None,
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.field = field
        self.retry_delay = retry_delay
        """Seconds the dealer asks the caller to wait before retrying, if it said."""


class InvalidArgument(FairdeckError):
    """The request was malformed; ``field`` names the offending field."""


class HandNotFound(FairdeckError):
    """No such hand (or not one of yours)."""


class NotInLog(FairdeckError):
    """The transparency log has no entry at that index or for that hand
    (ENTRY_NOT_FOUND), or no signed checkpoint of that size (NO_CHECKPOINT)."""


class FailedPrecondition(FairdeckError):
    """The hand is not in a state that allows this (FAILED_PRECONDITION)."""


class HandClosed(FailedPrecondition):
    """The hand is closed: no more draws or seeds."""


class WrongPosition(FailedPrecondition):
    """A draw's ``expected_position`` is not where the hand is: another draw came first."""


class HandAlreadyShuffled(FailedPrecondition):
    """The hand's client seeds are fixed already."""


class NotEnoughCards(FailedPrecondition):
    """Fewer cards are left than were asked for."""


class AlreadyExists(FairdeckError):
    """What the call would create exists already (ALREADY_EXISTS)."""


class RequestIdReused(AlreadyExists):
    """The request id was used before for a different request."""


class PermissionDenied(FairdeckError):
    """The caller may not do this (reason ROLE_NOT_ALLOWED: not with its role)."""


class Unauthenticated(FairdeckError):
    """Missing or invalid credentials (reasons MISSING_CREDENTIALS, INVALID_TOKEN,
    INVALID_CERTIFICATE); an unknown and a revoked token get the same answer."""


class ResourceExhausted(FairdeckError):
    """A limit was hit; retry later."""


class Unavailable(FairdeckError):
    """The dealer could not be reached or could not record the request."""


class DeadlineExceeded(FairdeckError):
    """The call did not finish within its deadline."""


class Cancelled(FairdeckError):
    """The call was cancelled before it finished, with no answer: the client's
    channel closed, or the connection went away (docs/api.md, CANCELLED). Whether
    a call that changes state took effect is unknown; a retry with the same
    request_id finds out."""


class Unknown(FairdeckError):
    """The call failed with no known status (UNKNOWN; an RpcError that carries
    OK, which no failed call should, is reported as this too)."""


class Aborted(FairdeckError):
    """The operation was aborted, typically by a conflict (ABORTED)."""


class OutOfRange(FairdeckError):
    """A value was past the valid range (OUT_OF_RANGE)."""


class Unimplemented(FairdeckError):
    """The dealer does not implement this method (UNIMPLEMENTED): an older dealer."""


class Internal(FairdeckError):
    """A fault in the dealer (INTERNAL: reasons SEED_UNAVAILABLE, HAND_UNREADABLE, INTERNAL); the
    message never holds a stack trace or a secret."""


class DataLoss(FairdeckError):
    """Unrecoverable data loss or corruption (DATA_LOSS)."""


BY_CODE: dict[grpc.StatusCode, type[FairdeckError]] = {
    grpc.StatusCode.OK: Unknown,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNKNOWN: Unknown,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.NOT_FOUND: HandNotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}
"""The class for each status code when no known reason decides (every code is here)."""
_OWN_CLASS: dict[Reason, type[FairdeckError]] = {
    Reason.HAND_NOT_FOUND: HandNotFound,
    Reason.ENTRY_NOT_FOUND: NotInLog,
    Reason.NO_CHECKPOINT: NotInLog,
    Reason.NOT_ENOUGH_CARDS: NotEnoughCards,
    Reason.HAND_CLOSED: HandClosed,
    Reason.HAND_ALREADY_SHUFFLED: HandAlreadyShuffled,
    Reason.WRONG_POSITION: WrongPosition,
    Reason.REQUEST_ID_REUSED: RequestIdReused,
}
"""Reasons with a class of their own; every other reason takes its status code's class."""
BY_REASON: dict[str, type[FairdeckError]] = {
    reason.value: _OWN_CLASS.get(reason) or BY_CODE[grpc.StatusCode[STATUS[reason]]] for reason in Reason
}
"""The class for each reason of the contract (every ``fairdeck.wire.Reason`` is here), derived
from the contract's status of each reason, so a reason added there cannot be left out here."""


def from_rpc_error(error: grpc.RpcError) -> FairdeckError:
    """The SDK exception for a failed call (works for sync and aio errors)."""
    call: Any = error  # a grpc.Call (sync) or grpc.aio.AioRpcError: both have these methods
    code: grpc.StatusCode = call.code()
    message: str = call.details() or code.name
    reason, field, delay = _error_details(call)
    cls = BY_REASON.get(reason) or BY_CODE.get(code, Unknown)
    return cls(message, code=code, reason=reason, field=field, retry_delay=delay)


def _error_details(call: Any) -> tuple[str, str | None, float | None]:
    """(reason, field) of the ErrorInfo and the RetryInfo delay in the call's status trailer."""
    try:
        status = rpc_status.from_call(call)
    except (DecodeError, ValueError):  # a malformed trailer is no reason to lose the status code
        return "", None, None
    reason, field, delay = "", None, None
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            reason, field = info.reason, info.metadata.get("field")
        elif detail.Unpack(retry):
            delay = retry.retry_delay.ToNanoseconds() / 1e9
    return reason, field, delay
