"""The SDK's public surface: the blocking and asyncio clients match method for
method, ``fairdeck.__all__`` is pinned, and error reasons map to classes."""

from __future__ import annotations

import inspect
import re
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

import fairdeck
from fairdeck.client import AsyncDealerClient, DealerClient, exceptions
from fairdeck.client.audit_client import AsyncAuditClient, AuditClient
from fairdeck.client.exceptions import from_rpc_error

PAIRS = [(DealerClient, AsyncDealerClient), (AuditClient, AsyncAuditClient)]
# The only names the two clients of a pair may differ by: the context manager protocols, and
# asyncio's aclose() (its close() is awaitable too).
SYNC_ONLY = {"__enter__", "__exit__"}
ASYNC_ONLY = {"__aenter__", "__aexit__", "aclose"}


def public(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if (not name.startswith("_") or name in SYNC_ONLY | ASYNC_ONLY) and callable(member)
    }


def shape(fn: Any) -> inspect.Signature:
    """The signature without async-ness: AsyncIterator[X] reads as Iterator[X]."""
    sig = inspect.signature(fn)
    ret = sig.return_annotation
    if isinstance(ret, str):
        ret = re.sub(r"\bAsyncIterator\b", "Iterator", ret)
    return sig.replace(return_annotation=ret)


@pytest.mark.parametrize("sync_cls, async_cls", PAIRS, ids=lambda c: c.__name__)
def test_sync_and_async_clients_have_the_same_methods(sync_cls: type, async_cls: type) -> None:
    sync, asyn = public(sync_cls), public(async_cls)
    assert set(sync) - SYNC_ONLY == set(asyn) - ASYNC_ONLY
    assert set(sync) >= SYNC_ONLY
    assert set(asyn) >= ASYNC_ONLY
    assert shape(sync_cls.__init__) == shape(async_cls.__init__)
    for name in set(sync) - SYNC_ONLY:
        assert shape(sync[name]) == shape(asyn[name]), name
        s_fn, a_fn = sync[name], asyn[name]
        assert not inspect.iscoroutinefunction(s_fn) and not inspect.isasyncgenfunction(s_fn), name
        assert inspect.iscoroutinefunction(a_fn) or inspect.isasyncgenfunction(a_fn), name
        assert (inspect.getdoc(s_fn) or "") == (inspect.getdoc(a_fn) or ""), f"{name}: docs differ"


def test_the_dealer_client_does_everything_the_service_does() -> None:
    from fairdeck.v1 import dealer_pb2

    rpcs = {m.name for m in dealer_pb2.DESCRIPTOR.services_by_name["DealerService"].methods}
    assert rpcs == {
        "OpenHand", "AddClientSeeds", "ShuffleHand", "DrawCards", "DealHand",
        "DealNewHand", "DealHands", "CloseHand", "GetHand",
    }  # fmt: skip
    assert set(public(DealerClient)) - SYNC_ONLY == {
        "open_hand", "add_client_seeds", "shuffle", "draw", "deal",
        "deal_new_hand", "deal_hands", "close_hand", "get", "close",
        "close_channel",  # deprecated, as close(hand_id) is

    }  # fmt: skip


def test_the_top_level_is_the_core() -> None:
    """fairdeck re-exports fairdeck.core, whose __all__ is pinned in tests/test_layout.py."""
    import fairdeck.core

    assert fairdeck.__all__ == fairdeck.core.__all__
    for name in fairdeck.__all__:
        assert getattr(fairdeck, name) is getattr(fairdeck.core, name), name
    star: dict[str, Any] = {}
    exec("from fairdeck import *", star)
    assert set(star) - {"__builtins__"} == set(fairdeck.__all__)


@pytest.mark.parametrize(
    ("old", "new"), [("deal_hand", "deal_local"), ("open_hand", "open_local"), ("reveal", "reveal_local")]
)
def test_the_old_local_dealing_names_still_work_with_a_warning(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"fairdeck.{old} is renamed fairdeck.{new}"):
        assert getattr(fairdeck, old) is getattr(fairdeck, new)


# -- exceptions.from_rpc_error -------------------------------------------------------------


class FakeRpcError(grpc.RpcError):
    """What grpc raises for a failed call: code, details and trailing metadata."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailers: tuple[tuple[str, Any], ...] = ()
    ) -> None:
        self._code, self._details, self._trailers = code, details, trailers

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._trailers


def details_trailer(
    code: grpc.StatusCode, message: str, reason: str, field: str | None = None
) -> tuple[str, bytes]:
    """The status trailer a dealer sends: its code and message are the call's own."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain="fairdeck.dev")
    if field is not None:
        info.metadata["field"] = field
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    return ("grpc-status-details-bin", status.SerializeToString())


C = grpc.StatusCode
BY_REASON = [
    (C.NOT_FOUND, "HAND_NOT_FOUND", "hand_id", exceptions.HandNotFound),
    (C.NOT_FOUND, "ENTRY_NOT_FOUND", "index", exceptions.NotInLog),
    (C.NOT_FOUND, "NO_CHECKPOINT", "tree_size", exceptions.NotInLog),
    (C.FAILED_PRECONDITION, "HAND_CLOSED", None, exceptions.HandClosed),
    (C.FAILED_PRECONDITION, "HAND_ALREADY_SHUFFLED", None, exceptions.HandAlreadyShuffled),
    (C.FAILED_PRECONDITION, "NOT_ENOUGH_CARDS", None, exceptions.NotEnoughCards),
    (C.ALREADY_EXISTS, "REQUEST_ID_REUSED", "request_id", exceptions.RequestIdReused),
    (C.INVALID_ARGUMENT, "UNKNOWN_DECK", "deck", exceptions.InvalidArgument),
    (C.INVALID_ARGUMENT, "INVALID_CLIENT_SEED", "client_seeds[3]", exceptions.InvalidArgument),
    (C.INVALID_ARGUMENT, "TOO_MANY_CLIENT_SEEDS", "client_seeds", exceptions.InvalidArgument),
    (C.INVALID_ARGUMENT, "INVALID_COUNT", "count", exceptions.InvalidArgument),
    (C.INVALID_ARGUMENT, "INVALID_HAND_COUNT", "hand_count", exceptions.InvalidArgument),
    (C.INVALID_ARGUMENT, "MISSING_HAND_ID", "hand_id", exceptions.InvalidArgument),
    (C.UNAVAILABLE, "STORAGE_UNAVAILABLE", None, exceptions.Unavailable),
    (C.INTERNAL, "SEED_UNAVAILABLE", None, exceptions.Internal),
    (C.INTERNAL, "INTERNAL", None, exceptions.Internal),
    # The reason decides over the code.
    (C.UNKNOWN, "HAND_CLOSED", None, exceptions.HandClosed),
]


@pytest.mark.parametrize(
    "code, reason, field, cls", BY_REASON, ids=[r[1] + "-" + r[0].name for r in BY_REASON]
)
def test_from_rpc_error_by_reason(code: grpc.StatusCode, reason: str, field: str | None, cls: type) -> None:
    error = FakeRpcError(
        code, "what went wrong", (("other", "x"), details_trailer(code, "what went wrong", reason, field))
    )
    exc = from_rpc_error(error)
    assert type(exc) is cls
    assert (exc.code, exc.reason, exc.field, str(exc)) == (code, reason, field, "what went wrong")
    assert isinstance(exc, exceptions.FairdeckError)


BY_CODE = [
    (C.INVALID_ARGUMENT, exceptions.InvalidArgument),
    (C.NOT_FOUND, exceptions.HandNotFound),
    (C.PERMISSION_DENIED, exceptions.PermissionDenied),
    (C.UNAUTHENTICATED, exceptions.Unauthenticated),
    (C.RESOURCE_EXHAUSTED, exceptions.ResourceExhausted),
    (C.UNAVAILABLE, exceptions.Unavailable),
    (C.DEADLINE_EXCEEDED, exceptions.DeadlineExceeded),
    (C.FAILED_PRECONDITION, exceptions.FailedPrecondition),
    (C.CANCELLED, exceptions.Cancelled),
    (C.UNKNOWN, exceptions.Unknown),
    (C.INTERNAL, exceptions.Internal),
]


@pytest.mark.parametrize("code, cls", BY_CODE, ids=[r[0].name for r in BY_CODE])
def test_from_rpc_error_by_code_without_details(code: grpc.StatusCode, cls: type) -> None:
    for trailers in [(), (("grpc-status-details-bin", b"\xff\xff not a status"),)]:
        exc = from_rpc_error(FakeRpcError(code, "", trailers))
        assert type(exc) is cls
        assert (exc.code, exc.reason, exc.field) == (code, "", None)
        assert str(exc) == code.name  # no details: the code's name, never an empty message


def test_from_rpc_error_unknown_reason_keeps_it() -> None:
    exc = from_rpc_error(
        FakeRpcError(C.INVALID_ARGUMENT, "x", (details_trailer(C.INVALID_ARGUMENT, "x", "NEW_ONE", "f"),))
    )
    assert type(exc) is exceptions.InvalidArgument
    assert (exc.reason, exc.field) == ("NEW_ONE", "f")


@pytest.mark.parametrize(
    "trailer",
    [
        details_trailer(C.FAILED_PRECONDITION, "x", "HAND_CLOSED"),
        details_trailer(C.UNAVAILABLE, "y", "HAND_CLOSED"),
    ],
    ids=["other-code", "other-message"],
)
def test_from_rpc_error_ignores_a_status_trailer_of_another_status(trailer: tuple[str, bytes]) -> None:
    """grpcio-status reads the trailer only if it agrees with the call's status (a proxy
    may answer with its own status and pass the dealer's trailer on): the code decides."""
    exc = from_rpc_error(FakeRpcError(C.UNAVAILABLE, "x", (trailer,)))
    assert type(exc) is exceptions.Unavailable
    assert (exc.reason, exc.field) == ("", None)


def test_every_exception_is_a_fairdeck_error() -> None:
    classes = [
        obj
        for _, obj in inspect.getmembers(exceptions, inspect.isclass)
        if obj.__module__ == exceptions.__name__ and issubclass(obj, Exception)
    ]
    assert len(classes) >= 12
    assert all(issubclass(cls, exceptions.FairdeckError) for cls in classes)
