"""The dealer's layers run as one interceptor, wrapped once per method, without the layers
that have nothing to do (edge/chain.py: four interceptors used to run on every call, even with
the limits off)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from fairdeck.client import DealerClient
from fairdeck_server.edge.chain import CallInterceptor
from tests.support.dealers import RunningDealer
from tests.support.ops import captured

DEAL_NEW_HAND = "/fairdeck.v1.DealerService/DealNewHand"
DEAL_HANDS = "/fairdeck.v1.DealerService/DealHands"


def _layers(behavior: Any) -> list[str]:
    """The wrappers around a handler's behavior, outermost first, by the function each made."""
    names = []
    while behavior is not None:
        names.append(behavior.__qualname__)
        cells = dict(zip(behavior.__code__.co_freevars, behavior.__closure__ or (), strict=True))
        inner = cells.get("inner") or cells.get("behavior")
        behavior = inner.cell_contents if inner is not None else None
    return names


def test_with_limits_and_default_deadline_off_a_call_runs_only_observing_and_auth(tmp_path: Path) -> None:
    with (
        captured("fairdeck.access") as out,
        RunningDealer(
            tmp_path / "data",
            rate_limit=0,
            max_open_hands=0,
            max_calls_in_flight=0,
            max_streams=0,
            default_deadline=0,
        ) as running,
    ):
        with DealerClient(running.target) as client:
            client.deal_new_hand()
            client.deal_new_hand()
            assert len(list(client.deal_hands(hand_count=3))) == 3
        assert running.server is not None
        interceptor = running.server.interceptor
        assert isinstance(interceptor, CallInterceptor)
        known = dict(interceptor._wrapped)
    # One wrapped handler per method, made at its first call and kept.
    assert DEAL_NEW_HAND in known and DEAL_HANDS in known
    assert _layers(known[DEAL_NEW_HAND][1].unary_unary) == [
        "acyclic.<locals>.outermost",  # observing's: its AbortError leaves with no cycle
        "ObservingInterceptor._unary.<locals>.behavior",
        "_unary.<locals>.call",  # auth
        "DealerServicer.DealNewHand",  # the servicer (functools.wraps names it)
    ]
    assert _layers(known[DEAL_HANDS][1].unary_stream)[:3] == [
        "acyclic.<locals>.outermost",
        "ObservingInterceptor._stream.<locals>.behavior",
        "_streaming.<locals>.call",
    ]
    # What the left-out limits layer used to do for the logs, auth does: the tenant is known.
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    access = [(line["method"], line["tenant"], line["code"]) for line in lines]
    assert access.count((DEAL_NEW_HAND, "default", "OK")) == 2
    assert access.count((DEAL_HANDS, "default", "OK")) == 1


def test_with_production_limits_every_layer_runs_in_order(tmp_path: Path) -> None:
    with RunningDealer(tmp_path / "data") as running:  # rate limit, open-hands cap, 30 s default deadline
        with DealerClient(running.target) as client:
            client.deal_new_hand()
        with grpc.insecure_channel(running.target) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
        assert running.server is not None
        known = dict(running.server.interceptor._wrapped)
    assert _layers(known[DEAL_NEW_HAND][1].unary_unary) == [
        "acyclic.<locals>.outermost",
        "ObservingInterceptor._unary.<locals>.behavior",
        "DeadlineInterceptor._unary.<locals>.behavior",
        "_unary.<locals>.call",
        "LimitsInterceptor._unary.<locals>.behavior",
        "DealerServicer.DealNewHand",
    ]
    # Health is observed (counted and logged), never authenticated, limited or cut short.
    check = next(v for k, v in known.items() if k.startswith("/grpc.health.v1.Health/"))
    assert _layers(check[1].unary_unary)[:2] == [
        "acyclic.<locals>.outermost",
        "ObservingInterceptor._unary.<locals>.behavior",
    ]
    assert len(_layers(check[1].unary_unary)) == 3
