"""Every error path of the dealer, as a table.

Each row is one refused call: the raw request sent with the generated stub
(status code, and the grpc-status-details-bin trailer parsed as a
google.rpc.Status holding an ErrorInfo), then the same call through the SDK
(exception class, .code, .reason, .field). No message may carry a stack
trace or a file path. Then raw garbage on the wire, which must not crash
the dealer nor be answered UNKNOWN/INTERNAL.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import (
    FairdeckError,
    HandAlreadyShuffled,
    HandClosed,
    HandNotFound,
    InvalidArgument,
    NotEnoughCards,
    RequestIdReused,
)
from fairdeck.v1 import dealer_pb2 as pb
from fairdeck.v1 import dealer_pb2_grpc
from tests.support.error_details import DOMAIN, assert_no_leak, error_info

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
EXISTS = grpc.StatusCode.ALREADY_EXISTS

HAND_METHODS = ("AddClientSeeds", "ShuffleHand", "DrawCards", "DealHand", "CloseHand", "GetHand")
UNKNOWN_HAND = "no-such-hand-0123456789"
TAKEN_REQUEST_ID = "taken:request-1"
BIG = b"\xab" * 257  # one byte over the limit


def seed(value: str | bytes | None) -> pb.ClientSeed:
    if value is None:
        return pb.ClientSeed()  # neither text nor data: only a raw client can send it
    if isinstance(value, str):
        return pb.ClientSeed(text=value)
    return pb.ClientSeed(data=value)


def many(n: int) -> list[pb.ClientSeed]:
    return [seed(f"seat-{i}") for i in range(n)]


def many_sdk(n: int) -> list[str]:
    return [f"seat-{i}" for i in range(n)]


# -- what each row needs before its call: returns the hand_id to use ---------------


def _open(c: DealerClient) -> str:
    return c.open_hand("standard").hand_id


def _shuffled(c: DealerClient) -> str:
    hid = _open(c)
    c.shuffle(hid, ["s"])
    return hid


def _closed(c: DealerClient) -> str:
    hid = _open(c)
    c.close_hand(hid)
    return hid


def _fifty_drawn(c: DealerClient) -> str:
    hid = _open(c)
    c.draw(hid, 50)
    return hid


def _forty_seeds(c: DealerClient) -> str:
    hid = _open(c)
    c.add_client_seeds(hid, many_sdk(20))
    c.add_client_seeds(hid, many_sdk(20))
    return hid


def _taken_request_id(c: DealerClient) -> str:
    return c.open_hand("standard", request_id=TAKEN_REQUEST_ID).hand_id


SETUPS: dict[str, Callable[[DealerClient], str]] = {
    "none": lambda c: UNKNOWN_HAND,
    "open": _open,
    "shuffled": _shuffled,
    "closed": _closed,
    "fifty-drawn": _fifty_drawn,
    "forty-seeds": _forty_seeds,
    "taken-request-id": _taken_request_id,
}


@dataclass(frozen=True)
class Row:
    id: str
    setup: str
    method: str
    request: Callable[[str], Message]
    """The raw request, given the hand_id the setup made."""
    sdk: Callable[[DealerClient, str], Any] | None
    """The same call through the SDK (None where the SDK cannot express it)."""
    code: grpc.StatusCode
    reason: str
    field: str | None
    exc: type[FairdeckError]


def _hand_request(method: str, hid: str) -> Message:
    return {
        "AddClientSeeds": lambda: pb.AddClientSeedsRequest(hand_id=hid, client_seeds=[seed("s")]),
        "ShuffleHand": lambda: pb.ShuffleHandRequest(hand_id=hid),
        "DrawCards": lambda: pb.DrawCardsRequest(hand_id=hid, count=1),
        "DealHand": lambda: pb.DealHandRequest(hand_id=hid),
        "CloseHand": lambda: pb.CloseHandRequest(hand_id=hid),
        "GetHand": lambda: pb.GetHandRequest(hand_id=hid),
    }[method]()


def _hand_sdk(method: str) -> Callable[[DealerClient, str], Any]:
    return {
        "AddClientSeeds": lambda c, h: c.add_client_seeds(h, ["s"]),
        "ShuffleHand": lambda c, h: c.shuffle(h),
        "DrawCards": lambda c, h: c.draw(h, 1),
        "DealHand": lambda c, h: c.deal(h),
        "CloseHand": lambda c, h: c.close_hand(h),
        "GetHand": lambda c, h: c.get(h),
    }[method]


def _hand_id_rows() -> Iterator[Row]:
    """Every method that takes a hand_id: missing, malformed, too long, unknown."""
    bad_ids = [
        ("missing", "", "MISSING_HAND_ID", INVALID, InvalidArgument),
        ("path", "../../etc/passwd", "INVALID_HAND_ID", INVALID, InvalidArgument),
        ("space", "hand 1", "INVALID_HAND_ID", INVALID, InvalidArgument),
        ("too-long", "h" * 65, "INVALID_HAND_ID", INVALID, InvalidArgument),
        ("unknown", UNKNOWN_HAND, "HAND_NOT_FOUND", NOT_FOUND, HandNotFound),
    ]
    for method in HAND_METHODS:
        for name, hid, reason, code, exc in bad_ids:
            yield Row(
                f"{method}-hand-id-{name}",
                "none",
                method,
                lambda _, m=method, h=hid: _hand_request(m, h),  # type: ignore[misc]
                lambda c, _, m=method, h=hid: _hand_sdk(m)(c, h),  # type: ignore[misc]
                code,
                reason,
                "hand_id",
                exc,
            )


def _seed_rows() -> Iterator[Row]:
    """Client seeds, on every call that takes them."""
    cases: list[tuple[str, list[pb.ClientSeed], list[str | bytes] | None, str, str]] = [
        ("oversized-data", [seed("ok"), seed(BIG)], ["ok", BIG], "INVALID_CLIENT_SEED", "client_seeds[1]"),
        # 129 characters, 258 bytes of UTF-8: the limit counts bytes.
        (
            "oversized-text",
            [seed("\u00e9" * 129)],
            ["\u00e9" * 129],
            "INVALID_CLIENT_SEED",
            "client_seeds[0]",
        ),
        ("empty-data", [seed(b"")], [b""], "INVALID_CLIENT_SEED", "client_seeds[0]"),
        (
            "empty-text",
            [seed("a"), seed("b"), seed("")],
            ["a", "b", ""],
            "INVALID_CLIENT_SEED",
            "client_seeds[2]",
        ),
        ("unset", [seed(None)], None, "INVALID_CLIENT_SEED", "client_seeds[0]"),
        ("65-seeds", many(65), many_sdk(65), "TOO_MANY_CLIENT_SEEDS", "client_seeds"),
    ]
    for name, raw, sdk_seeds, reason, field in cases:
        rows = [
            (
                "AddClientSeeds",
                "open",
                lambda h, r=raw: pb.AddClientSeedsRequest(hand_id=h, client_seeds=r),
                lambda c, h, s=sdk_seeds: c.add_client_seeds(h, s),
            ),
            (
                "ShuffleHand",
                "open",
                lambda h, r=raw: pb.ShuffleHandRequest(hand_id=h, client_seeds=r),
                lambda c, h, s=sdk_seeds: c.shuffle(h, s),
            ),
            (
                "DealNewHand",
                "none",
                lambda h, r=raw: pb.DealNewHandRequest(deck="standard", client_seeds=r),
                lambda c, h, s=sdk_seeds: c.deal_new_hand("standard", client_seeds=s),
            ),
            (
                "DealHands",
                "none",
                lambda h, r=raw: pb.DealHandsRequest(deck="standard", hand_count=3, client_seeds=r),
                lambda c, h, s=sdk_seeds: list(c.deal_hands("standard", 3, client_seeds=s)),
            ),
        ]
        for method, setup, request, sdk in rows:
            yield Row(
                f"{method}-seeds-{name}",
                setup,
                method,
                request,
                sdk if sdk_seeds is not None else None,
                INVALID,
                reason,
                field,
                InvalidArgument,
            )


def _other_rows() -> Iterator[Row]:
    for deck in ("nope", "", "Standard", "shoe-9", "shoe-0", "x" * 1000):
        name = deck[:12] or "empty"
        yield Row(
            f"OpenHand-deck-{name}", "none", "OpenHand",
            lambda h, d=deck: pb.OpenHandRequest(deck=d),
            lambda c, h, d=deck: c.open_hand(d),
            INVALID, "UNKNOWN_DECK", "deck", InvalidArgument,
        )  # fmt: skip
    yield Row(
        "DealNewHand-deck-unknown", "none", "DealNewHand",
        lambda h: pb.DealNewHandRequest(deck="nope"),
        lambda c, h: c.deal_new_hand("nope"),
        INVALID, "UNKNOWN_DECK", "deck", InvalidArgument,
    )  # fmt: skip
    yield Row(
        "DealHands-deck-unknown", "none", "DealHands",
        lambda h: pb.DealHandsRequest(deck="nope", hand_count=1),
        lambda c, h: list(c.deal_hands("nope", 1)),
        INVALID, "UNKNOWN_DECK", "deck", InvalidArgument,
    )  # fmt: skip

    for rid in ("has space", "r" * 65, "semi;colon", "caf\u00e9"):
        name = rid[:10].replace(" ", "_")
        yield Row(
            f"OpenHand-request-id-{name}", "none", "OpenHand",
            lambda h, r=rid: pb.OpenHandRequest(deck="standard", request_id=r),
            lambda c, h, r=rid: c.open_hand("standard", request_id=r),
            INVALID, "INVALID_REQUEST_ID", "request_id", InvalidArgument,
        )  # fmt: skip
        yield Row(
            f"DealNewHand-request-id-{name}", "none", "DealNewHand",
            lambda h, r=rid: pb.DealNewHandRequest(deck="standard", request_id=r),
            lambda c, h, r=rid: c.deal_new_hand("standard", request_id=r),
            INVALID, "INVALID_REQUEST_ID", "request_id", InvalidArgument,
        )  # fmt: skip

    yield Row(
        "OpenHand-request-id-reused-other-deck", "taken-request-id", "OpenHand",
        lambda h: pb.OpenHandRequest(deck="short", request_id=TAKEN_REQUEST_ID),
        lambda c, h: c.open_hand("short", request_id=TAKEN_REQUEST_ID),
        EXISTS, "REQUEST_ID_REUSED", "request_id", RequestIdReused,
    )  # fmt: skip
    yield Row(
        "DealNewHand-request-id-of-an-open", "taken-request-id", "DealNewHand",
        lambda h: pb.DealNewHandRequest(deck="standard", request_id=TAKEN_REQUEST_ID),
        lambda c, h: c.deal_new_hand("standard", request_id=TAKEN_REQUEST_ID),
        EXISTS, "REQUEST_ID_REUSED", "request_id", RequestIdReused,
    )  # fmt: skip

    for name, count in (("zero", 0), ("deck-size-plus-one", 53), ("uint32-max", 2**32 - 1)):
        yield Row(
            f"DrawCards-count-{name}", "open", "DrawCards",
            lambda h, n=count: pb.DrawCardsRequest(hand_id=h, count=n),
            lambda c, h, n=count: c.draw(h, n),
            INVALID, "INVALID_COUNT", "count", InvalidArgument,
        )  # fmt: skip
    yield Row(
        "DrawCards-past-the-end", "fifty-drawn", "DrawCards",
        lambda h: pb.DrawCardsRequest(hand_id=h, count=3),
        lambda c, h: c.draw(h, 3),
        PRECONDITION, "NOT_ENOUGH_CARDS", None, NotEnoughCards,
    )  # fmt: skip

    for method in ("DrawCards", "DealHand", "AddClientSeeds", "ShuffleHand"):
        yield Row(
            f"{method}-after-close", "closed", method,
            lambda h, m=method: _hand_request(m, h),
            _hand_sdk(method),
            PRECONDITION, "HAND_CLOSED", None, HandClosed,
        )  # fmt: skip
    for method in ("AddClientSeeds", "ShuffleHand"):
        yield Row(
            f"{method}-after-shuffle", "shuffled", method,
            lambda h, m=method: _hand_request(m, h),
            _hand_sdk(method),
            PRECONDITION, "HAND_ALREADY_SHUFFLED", None, HandAlreadyShuffled,
        )  # fmt: skip
    yield Row(
        "AddClientSeeds-past-64-in-total", "forty-seeds", "AddClientSeeds",
        lambda h: pb.AddClientSeedsRequest(hand_id=h, client_seeds=many(25)),
        lambda c, h: c.add_client_seeds(h, many_sdk(25)),
        INVALID, "TOO_MANY_CLIENT_SEEDS", "client_seeds", InvalidArgument,
    )  # fmt: skip
    yield Row(
        "ShuffleHand-past-64-in-total", "forty-seeds", "ShuffleHand",
        lambda h: pb.ShuffleHandRequest(hand_id=h, client_seeds=many(25)),
        lambda c, h: c.shuffle(h, many_sdk(25)),
        INVALID, "TOO_MANY_CLIENT_SEEDS", "client_seeds", InvalidArgument,
    )  # fmt: skip

    for name, count in (("zero", 0), ("over-100000", 100_001)):
        yield Row(
            f"DealHands-hand-count-{name}", "none", "DealHands",
            lambda h, n=count: pb.DealHandsRequest(deck="standard", hand_count=n),
            lambda c, h, n=count: list(c.deal_hands("standard", n)),
            INVALID, "INVALID_HAND_COUNT", "hand_count", InvalidArgument,
        )  # fmt: skip


ROWS = [*_other_rows(), *_seed_rows(), *_hand_id_rows()]


def test_table_covers_every_method_and_reason() -> None:
    assert len({row.id for row in ROWS}) == len(ROWS)
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["DealerService"].methods}
    assert {row.method for row in ROWS} == methods
    assert {row.reason for row in ROWS} >= {
        "UNKNOWN_DECK", "INVALID_CLIENT_SEED", "TOO_MANY_CLIENT_SEEDS", "INVALID_REQUEST_ID",
        "REQUEST_ID_REUSED", "MISSING_HAND_ID", "INVALID_HAND_ID", "INVALID_COUNT", "HAND_NOT_FOUND",
        "NOT_ENOUGH_CARDS", "HAND_CLOSED", "HAND_ALREADY_SHUFFLED", "INVALID_HAND_COUNT",
    }  # fmt: skip


@pytest.fixture
def stub(running) -> Iterator[dealer_pb2_grpc.DealerServiceStub]:  # type: ignore[no-untyped-def]
    with grpc.insecure_channel(running.target) as channel:
        yield dealer_pb2_grpc.DealerServiceStub(channel)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_error(row: Row, client: DealerClient, stub: dealer_pb2_grpc.DealerServiceStub) -> None:
    hid = SETUPS[row.setup](client)

    # Raw, with the generated stub: the status code and the trailer.
    with pytest.raises(grpc.RpcError) as raised:
        answer = getattr(stub, row.method)(row.request(hid), timeout=10)
        if row.method == "DealHands":
            list(answer)
    error: Any = raised.value
    assert error.code() == row.code, error.details()
    message = error.details()
    assert message
    assert_no_leak(message)
    status, info = error_info(error)
    assert status.code == row.code.value[0]
    assert status.message == message
    assert info.domain == DOMAIN
    assert info.reason == row.reason
    assert info.metadata.get("field") == row.field
    assert set(info.metadata) <= {"field"}

    # Through the SDK: the class, code, reason and field.
    if row.sdk is None:
        return
    with pytest.raises(FairdeckError) as sdk_raised:
        row.sdk(client, hid)
    exc = sdk_raised.value
    assert type(exc) is row.exc
    assert (exc.code, exc.reason, exc.field) == (row.code, row.reason, row.field)
    assert str(exc) == message
    assert isinstance(exc.__cause__, grpc.RpcError)


def test_limits_themselves_are_accepted(client: DealerClient) -> None:
    """The boundaries next to the refusals above: so the table cannot pass by refusing everything."""
    hid = client.open_hand("standard").hand_id
    client.add_client_seeds(hid, [b"\xab" * 256, "\u00e9" * 128])
    client.add_client_seeds(hid, many_sdk(62))  # 64 in total
    assert len(client.shuffle(hid).client_seeds) == 64
    assert len(client.draw(hid, 52).cards) == 52
    assert client.open_hand("standard", request_id="r" * 64).hand_id
    assert client.get(client.open_hand("jokers").hand_id).deck_size == 54
    assert len(list(client.deal_hands("short", 1, client_seeds=many_sdk(64)))) == 1


# -- garbage on the wire ----------------------------------------------------------------

UNARY = (
    "OpenHand",
    "AddClientSeeds",
    "ShuffleHand",
    "DrawCards",
    "DealHand",
    "DealNewHand",
    "CloseHand",
    "GetHand",
)
ALLOWED_FOR_GARBAGE = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
}


def garbage_bodies(method: str) -> list[bytes]:
    """Bodies that are not a valid message: a bad wire type, a truncated varint,
    a length past the end, an invalid UTF-8 string, and seeded random bytes."""
    rng = random.Random(f"garbage-{method}")
    fixed = [
        b"\xff\xff\xff",
        b"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x0a\x7f\x00",
        b"\x0a\x02\xc3\x28",
    ]
    return fixed + [rng.randbytes(rng.randrange(1, 200)) for _ in range(6)]


def raw_call(channel: grpc.Channel, method: str, body: bytes) -> grpc.RpcError | None:
    path = f"/fairdeck.v1.DealerService/{method}"
    try:
        if method == "DealHands":
            list(
                channel.unary_stream(path, request_serializer=None, response_deserializer=None)(
                    body, timeout=10
                )
            )
        else:
            channel.unary_unary(path, request_serializer=None, response_deserializer=None)(body, timeout=10)
    except grpc.RpcError as e:
        return e
    return None


def assert_healthy(channel: grpc.Channel, client: DealerClient) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "fairdeck.v1.DealerService"):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    hand = client.open_hand("standard")
    client.draw(hand.hand_id, 2)
    client.close_hand(hand.hand_id).verify(commitment=hand.commitment)


@pytest.mark.parametrize("method", [*UNARY, "DealHands"])
def test_garbage_does_not_crash_nor_leak(method: str, running, client: DealerClient) -> None:  # type: ignore[no-untyped-def]
    with grpc.insecure_channel(running.target) as channel:
        for body in garbage_bodies(method):
            error: Any = raw_call(channel, method, body)
            if error is not None:
                assert error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
                assert_no_leak(error.details() or "")
        assert_healthy(channel, client)


@pytest.mark.parametrize("method", [*UNARY, "DealHands"])
def test_garbage_is_invalid_argument(method: str, running) -> None:  # type: ignore[no-untyped-def]
    with grpc.insecure_channel(running.target) as channel:
        for body in garbage_bodies(method):
            error: Any = raw_call(channel, method, body)
            if error is None:
                continue  # random bytes that happen to parse and be accepted
            assert error.code() in ALLOWED_FOR_GARBAGE, (body, error.code(), error.details())
            _, info = error_info(error)
            assert info.domain == DOMAIN
