"""Strangers at the co-dealer's port, with no token: gRPC's own bounds hold before any call of
ours runs. The co-dealer's server had none of the dealer's (edge/transport.py): a connection that
never finished its HTTP/2 preface was kept for gRPC's default 120 s, and a request of up to 4 MiB
was read and decoded before the token was checked. Now the handshake is bounded and a request
larger than the largest the contract allows is refused on its raw size; grpcio's own log lines
are filtered as the dealer's are (edge/grpc_logs.py). A real ``fairdeck codealer serve`` and raw
sockets (tests/security/rawh2.py)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from fairdeck.v1 import codealer_pb2
from tests.support import rawh2
from tests.support.codealers import CodealerProcess, init_codealer
from tests.support.forked_serve import ServeForker
from tests.support.raw_connections import closed_after, in_threads

HANDSHAKE_S = 10.0
"""The co-dealer's handshake bound (codealer_servicer.HANDSHAKE_S)."""
TOO_LARGE = 2 * 1024 * 1024 + 1
"""Past codealer_servicer.MAX_REQUEST_BYTES, under gRPC's default 4 MiB."""


@pytest.fixture
def codealer(tmp_path: Path, serve_forker: ServeForker) -> CodealerProcess:
    init_codealer(tmp_path / "cd1")
    return CodealerProcess(tmp_path / "cd1", forker=serve_forker)


@pytest.mark.light
def test_a_connection_that_never_finishes_its_handshake_was_kept_two_minutes(
    codealer: CodealerProcess,
) -> None:
    with codealer:
        times = in_threads(
            {
                "nothing": lambda: closed_after(codealer.port, [], 3 * HANDSHAKE_S),
                "half a preface": lambda: closed_after(codealer.port, [rawh2.PREFACE[:10]], 3 * HANDSHAKE_S),
                "preface, no settings": lambda: closed_after(codealer.port, [rawh2.PREFACE], 3 * HANDSHAKE_S),
            }
        )
    assert all(t is not None and t < 2 * HANDSHAKE_S for t in times.values()), times


def test_a_request_past_the_largest_the_contract_allows_is_refused_on_its_raw_size(
    codealer: CodealerProcess,
) -> None:
    huge = codealer_pb2.AnnounceHandRequest(hand_id="h" * TOO_LARGE, deck="standard")
    with codealer:
        for token in (None, "fdcd_" + "A" * 43, codealer.token):  # no token, a wrong one, the dealer's
            with pytest.raises(grpc.RpcError) as refused:
                codealer.stub(token).AnnounceHand(huge, timeout=30)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (token is None, refused.value)
        log = codealer.stop()
    assert "Traceback" not in log


def test_the_codealers_grpc_logged_a_token_that_is_not_utf8_whole_at_error(
    codealer: CodealerProcess,
) -> None:
    """The co-dealer's server had none of the dealer's grpcio log filters: a metadata value that
    is not valid UTF-8 was logged whole by grpcio at ERROR with a traceback, twice per call, before
    any of its code ran: a token, secret and all (here the dealer's own, one byte appended). Every
    server is now made by edge/transport.aio_server, which installs them: one WARNING giving the
    length, no ERROR line, no token; the call refused UNAUTHENTICATED as any wrong token."""
    with codealer:
        token = codealer.token.encode()
        answer = rawh2.call(
            codealer.target,
            "/fairdeck.v1.CoDealerService/GetIdentity",
            b"",
            [(b"authorization", b"Bearer " + token + b"\xff")],
        )
        assert int(answer["grpc-status"]) == grpc.StatusCode.UNAUTHENTICATED.value[0], answer
        log = codealer.stop()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert errors == [] and "Traceback" not in log, log[-3000:]
    assert token.decode() not in log and token.decode()[-16:] not in log, log[-3000:]
    assert "withheld: it may hold a credential" in log, log[-3000:]  # grpcio did try to log it
