"""Domain errors of the dealer, each with a canonical status and a stable reason.

The domain does not import grpc: ``Status`` names the canonical code, and the
servicer translates every ``DealerError`` at one boundary (servicer.py). The
``reason`` strings are part of the API: clients switch on them, so never
change one (docs/api.md lists them all).
"""

from __future__ import annotations

import enum


class Status(enum.Enum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


class DealerError(Exception):
    """A request the dealer refuses. The message must never contain a secret."""

    def __init__(self, status: Status, reason: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.field = field


def invalid(field: str, reason: str, message: str) -> DealerError:
    return DealerError(Status.INVALID_ARGUMENT, reason, f"{field}: {message}", field)


def hand_not_found() -> DealerError:
    # The same answer for a hand that does not exist and one of another tenant.
    return DealerError(Status.NOT_FOUND, "HAND_NOT_FOUND", "hand not found", "hand_id")


def precondition(reason: str, message: str) -> DealerError:
    return DealerError(Status.FAILED_PRECONDITION, reason, message)


def storage_unavailable(message: str) -> DealerError:
    return DealerError(Status.UNAVAILABLE, "STORAGE_UNAVAILABLE", message)
