"""What every refused call carries and must not: the ErrorInfo of its rich status in the
``fairdeck.dev`` domain (``error_info``), and no sign of a stack trace or file path in its
message (``assert_no_leak``)."""

from __future__ import annotations

import re

import grpc
from google.rpc import error_details_pb2, status_pb2

DOMAIN = "fairdeck.dev"


# Signs of a leaked stack trace or file path in a message.
LEAKS = re.compile(r"Traceback|File \"|\.py\b|line \d+|(?:/[\w.-]+){2,}|[A-Za-z]:\\\\")


def assert_no_leak(message: str) -> None:
    assert not LEAKS.search(message), f"message leaks a trace or a path: {message!r}"


def error_info(error: grpc.RpcError) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    """The google.rpc.Status in the trailer and its one ErrorInfo."""
    trailers = [v for k, v in error.trailing_metadata() or () if k == "grpc-status-details-bin"]  # type: ignore[attr-defined]
    assert len(trailers) == 1, "exactly one grpc-status-details-bin trailer"
    status = status_pb2.Status.FromString(trailers[0])
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        assert detail.Unpack(info), f"unexpected detail type {detail.type_url}"
        infos.append(info)
    assert len(infos) == 1
    return status, infos[0]
