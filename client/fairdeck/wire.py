"""What the SDK and the dealer agree on beyond the .proto files: the metadata key of
the API token, which addresses count as loopback (where plain text is allowed), and
the error contract: the error domain, the trailer that carries the details, and
every ``reason`` the dealer sends with the status code it comes with (``Reason``,
``STATUS``). The servicer, the interceptors, the storage engines, the SDK's
exception table and docs/api.md all follow this one list (tests/client/test_error_contract.py).

Both ``fairdeck.client`` and ``fairdeck_server`` import it, so it lives at the top of
the package and imports only the standard library: the server reaches it without
loading the SDK, and the SDK without the server.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["AUTHORIZATION", "ERROR_DOMAIN", "STATUS", "STATUS_DETAILS_KEY", "Reason", "is_loopback"]


AUTHORIZATION = "authorization"
"""The metadata key of the API token: ``authorization: Bearer fdk_<id>_<secret>``."""

ERROR_DOMAIN = "fairdeck.dev"
"""The ``domain`` of every google.rpc.ErrorInfo the dealer sends."""
STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""The trailer holding the google.rpc.Status (grpcio-status reads the same key)."""


class Reason(enum.StrEnum):
    """The stable ``reason`` of an ErrorInfo. Part of the API: clients switch on
    them, so a reason is never renamed nor given another meaning (docs/api.md)."""

    # INVALID_ARGUMENT: a request field is malformed or out of range; ``field`` names it.
    MALFORMED_REQUEST = "MALFORMED_REQUEST"
    UNKNOWN_DECK = "UNKNOWN_DECK"
    INVALID_CLIENT_SEED = "INVALID_CLIENT_SEED"
    TOO_MANY_CLIENT_SEEDS = "TOO_MANY_CLIENT_SEEDS"
    INVALID_COUNT = "INVALID_COUNT"
    INVALID_HAND_COUNT = "INVALID_HAND_COUNT"
    INVALID_HAND_ID = "INVALID_HAND_ID"
    MISSING_HAND_ID = "MISSING_HAND_ID"
    INVALID_REQUEST_ID = "INVALID_REQUEST_ID"
    INVALID_PAGE_TOKEN = "INVALID_PAGE_TOKEN"  # noqa: S105 (a reason, not a secret)
    INVALID_PAGE_SIZE = "INVALID_PAGE_SIZE"
    MISSING_ENTRY = "MISSING_ENTRY"
    INVALID_ENTRY_KIND = "INVALID_ENTRY_KIND"
    INVALID_TREE_SIZE = "INVALID_TREE_SIZE"
    ENTRY_NOT_IN_TREE = "ENTRY_NOT_IN_TREE"
    INVALID_MODE = "INVALID_MODE"
    INVALID_SEAT_KEY = "INVALID_SEAT_KEY"
    INVALID_TRANSCRIPT = "INVALID_TRANSCRIPT"
    # NOT_FOUND
    HAND_NOT_FOUND = "HAND_NOT_FOUND"
    ENTRY_NOT_FOUND = "ENTRY_NOT_FOUND"
    NO_CHECKPOINT = "NO_CHECKPOINT"
    # FAILED_PRECONDITION
    NOT_ENOUGH_CARDS = "NOT_ENOUGH_CARDS"
    HAND_CLOSED = "HAND_CLOSED"
    HAND_ALREADY_SHUFFLED = "HAND_ALREADY_SHUFFLED"
    HAND_NOT_CLOSED = "HAND_NOT_CLOSED"
    WRONG_POSITION = "WRONG_POSITION"
    CODEAL_NOT_CONFIGURED = "CODEAL_NOT_CONFIGURED"
    CODEALER_REFUSED = "CODEALER_REFUSED"
    SHARE_OUT_OF_ORDER = "SHARE_OUT_OF_ORDER"
    DECK_NOT_DESCENDED = "DECK_NOT_DESCENDED"
    HAND_NOT_SHUFFLED = "HAND_NOT_SHUFFLED"
    SEATS_NOT_RELEASED = "SEATS_NOT_RELEASED"
    # ALREADY_EXISTS
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    # RESOURCE_EXHAUSTED (always with a RetryInfo)
    RATE_LIMITED = "RATE_LIMITED"
    AUTH_RATE_LIMITED = "AUTH_RATE_LIMITED"
    TOO_MANY_OPEN_HANDS = "TOO_MANY_OPEN_HANDS"
    TOO_MANY_CALLS = "TOO_MANY_CALLS"
    TOO_MANY_STREAMS = "TOO_MANY_STREAMS"
    # DEADLINE_EXCEEDED
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    # UNAVAILABLE
    STORAGE_UNAVAILABLE = "STORAGE_UNAVAILABLE"
    CODEALER_UNAVAILABLE = "CODEALER_UNAVAILABLE"
    # INTERNAL
    SEED_UNAVAILABLE = "SEED_UNAVAILABLE"
    HAND_UNREADABLE = "HAND_UNREADABLE"
    INTERNAL = "INTERNAL"
    CODEALER_INVALID = "CODEALER_INVALID"
    # UNAUTHENTICATED
    MISSING_CREDENTIALS = "MISSING_CREDENTIALS"
    INVALID_TOKEN = "INVALID_TOKEN"  # noqa: S105 (a reason, not a secret)
    INVALID_CERTIFICATE = "INVALID_CERTIFICATE"
    # PERMISSION_DENIED
    ROLE_NOT_ALLOWED = "ROLE_NOT_ALLOWED"
    SHARE_GIVEN_TO_ANOTHER_SEAT = "SHARE_GIVEN_TO_ANOTHER_SEAT"
    # UNIMPLEMENTED
    UNKNOWN_METHOD = "UNKNOWN_METHOD"


_STATUS_OF = {
    "INVALID_ARGUMENT": (
        Reason.MALFORMED_REQUEST,
        Reason.UNKNOWN_DECK,
        Reason.INVALID_CLIENT_SEED,
        Reason.TOO_MANY_CLIENT_SEEDS,
        Reason.INVALID_COUNT,
        Reason.INVALID_HAND_COUNT,
        Reason.INVALID_HAND_ID,
        Reason.MISSING_HAND_ID,
        Reason.INVALID_REQUEST_ID,
        Reason.INVALID_PAGE_TOKEN,
        Reason.INVALID_PAGE_SIZE,
        Reason.MISSING_ENTRY,
        Reason.INVALID_ENTRY_KIND,
        Reason.INVALID_TREE_SIZE,
        Reason.ENTRY_NOT_IN_TREE,
        Reason.INVALID_MODE,
        Reason.INVALID_SEAT_KEY,
        Reason.INVALID_TRANSCRIPT,
    ),
    "NOT_FOUND": (Reason.HAND_NOT_FOUND, Reason.ENTRY_NOT_FOUND, Reason.NO_CHECKPOINT),
    "FAILED_PRECONDITION": (
        Reason.NOT_ENOUGH_CARDS,
        Reason.HAND_CLOSED,
        Reason.HAND_ALREADY_SHUFFLED,
        Reason.HAND_NOT_CLOSED,
        Reason.WRONG_POSITION,
        Reason.CODEAL_NOT_CONFIGURED,
        Reason.CODEALER_REFUSED,
        Reason.SHARE_OUT_OF_ORDER,
        Reason.DECK_NOT_DESCENDED,
        Reason.HAND_NOT_SHUFFLED,
        Reason.SEATS_NOT_RELEASED,
    ),
    "ALREADY_EXISTS": (Reason.REQUEST_ID_REUSED,),
    "RESOURCE_EXHAUSTED": (
        Reason.RATE_LIMITED,
        Reason.AUTH_RATE_LIMITED,
        Reason.TOO_MANY_OPEN_HANDS,
        Reason.TOO_MANY_CALLS,
        Reason.TOO_MANY_STREAMS,
    ),
    "DEADLINE_EXCEEDED": (Reason.DEADLINE_EXCEEDED,),
    "UNAVAILABLE": (Reason.STORAGE_UNAVAILABLE, Reason.CODEALER_UNAVAILABLE),
    "INTERNAL": (Reason.SEED_UNAVAILABLE, Reason.HAND_UNREADABLE, Reason.INTERNAL, Reason.CODEALER_INVALID),
    "UNAUTHENTICATED": (Reason.MISSING_CREDENTIALS, Reason.INVALID_TOKEN, Reason.INVALID_CERTIFICATE),
    "PERMISSION_DENIED": (Reason.ROLE_NOT_ALLOWED, Reason.SHARE_GIVEN_TO_ANOTHER_SEAT),
    "UNIMPLEMENTED": (Reason.UNKNOWN_METHOD,),
}
STATUS: Mapping[Reason, str] = MappingProxyType(
    {reason: status for status, reasons in _STATUS_OF.items() for reason in reasons}
)
"""The canonical status code (its name, as in ``grpc.StatusCode``) each reason comes with."""


def is_loopback(address: str) -> bool:
    """Whether ``address`` (host:port, [v6]:port, or a gRPC target) stays on this machine.

    127.0.0.0/8, ::1, ``localhost`` and unix sockets are; the wildcards
    ``0.0.0.0`` and ``[::]`` listen on every interface, so they are not.

    >>> [is_loopback(a) for a in ("127.0.0.2:1", "[::1]:1", "localhost:1", "0.0.0.0:1", "[::]:1")]
    [True, True, True, False, False]
    """
    for scheme in ("unix:", "unix-abstract:"):
        if address.startswith(scheme):
            return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if address.startswith(scheme):
            address = address[len(scheme) :]
            break
    host = address
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
