"""Methods the dealer does not serve, and the one reflection advertises that it did not implement.

Health/List is answered (what Check answers, for every name health knows). Any other method
nobody serves ends UNIMPLEMENTED with the reason UNKNOWN_METHOD, no traceback in the dealer's
log, counted under UNIMPLEMENTED in the metrics under one label whatever the name, and limited
per client address as failed authentications are. The real `fairdeck serve`, its real log."""

from __future__ import annotations

import contextlib
import re
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from fairdeck.client.exceptions import from_rpc_error
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.waits import wait_for

SERVING = health_pb2.HealthCheckResponse.SERVING


def metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def metrics_port(dealer: DealerProcess) -> int:
    found = wait_for(
        "the metrics line",
        lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", dealer.stderr()),
        timeout=10,
    )
    return int(found.group(1))


@pytest.mark.light
def test_health_list_and_unknown_methods(tmp_path: Path, serve_forker: ServeForker) -> None:
    with DealerProcess(
        tmp_path / "d",
        tmp_path / "stderr",
        "--metrics-listen",
        "127.0.0.1:0",
        "--auth-failure-burst",
        "5",
        "--auth-failure-rate",
        "0.01",
        forker=serve_forker,
    ) as dealer:
        port = metrics_port(dealer)
        with grpc.insecure_channel(dealer.target) as channel:
            listed = health_pb2_grpc.HealthStub(channel).List(health_pb2.HealthListRequest(), timeout=10)
            assert {name: s.status for name, s in listed.statuses.items()} == {
                "": SERVING,
                "fairdeck.v1.DealerService": SERVING,
                "fairdeck.v1.AuditService": SERVING,
            }
            codes = []
            # Every call shape, in our services and outside them, with a name no label should hold.
            for i in range(8):
                method = ("/fairdeck.v1.DealerService/Nope", "/no.Such/Method", f"/x.Y/Z{i}")[i % 3]
                try:
                    if i % 2:
                        list(channel.unary_stream(method)(b"\x00garbage", timeout=10))
                    else:
                        channel.unary_unary(method)(b"", timeout=10)
                    codes.append(("OK", ""))
                except grpc.RpcError as e:
                    error = from_rpc_error(e)
                    codes.append((error.code.name, error.reason))
        # The address's five failures, then the held refusal of a failed call.
        assert codes[:5] == [("UNIMPLEMENTED", "UNKNOWN_METHOD")] * 5, codes
        assert codes[5:] == [("RESOURCE_EXHAUSTED", "AUTH_RATE_LIMITED")] * 3, codes
        # A refusal's status reaches the client a moment before the dealer has counted it.
        samples = metrics(port)

        def counted() -> bool:
            nonlocal samples
            samples = metrics(port)
            return sum(v for k, v in samples.items() if k[0] == "fairdeck_rpcs_total") >= 1 + 8

        with contextlib.suppress(AssertionError):  # the asserts below say what is missing
            wait_for("the calls counted", counted, timeout=10)
        assert (
            samples[
                (
                    "fairdeck_rpcs_total",
                    (("code", "OK"), ("method", "List"), ("service", "grpc.health.v1.Health")),
                )
            ]
            == 1
        )
        unknown = (("method", "unknown"), ("service", "unknown"))
        assert samples[("fairdeck_rpcs_total", (("code", "UNIMPLEMENTED"), *unknown))] == 5
        assert samples[("fairdeck_rpcs_total", (("code", "RESOURCE_EXHAUSTED"), *unknown))] == 3
        assert not [k for k in samples if k[0] == "fairdeck_rpcs_total" and ("code", "UNKNOWN") in k[1]]
        assert not [k for k in samples if "Z1" in str(k) or "Nope" in str(k)], (
            "a caller's name became a label"
        )
    log = (tmp_path / "stderr").read_text()
    assert "Traceback" not in log and "NotImplementedError" not in log, log
    assert "/x.Y/Z2 UNIMPLEMENTED" in log  # the access line names what was asked for
