"""Abuse of authentication: a token that reached the log through grpcio, and token spraying
before any limit applied; and a huge text seed at the gRPC edge. Real dealers only: the console
script in a subprocess, or DealerServer on 127.0.0.1:0, spoken to over real sockets."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import FairdeckError, ResourceExhausted, Unauthenticated
from fairdeck.core.seeds import MAX_CLIENT_SEED_CHARS
from fairdeck.v1 import dealer_pb2, dealer_pb2_grpc
from fairdeck.wire import Reason
from fairdeck_server.edge.dealer_servicer import client_seeds
from fairdeck_server.edge.peers import peer_address
from fairdeck_server.policy.auth import split_token
from fairdeck_server.refusals import DealerError
from tests.support import rawh2
from tests.support.dealers import DealerProcess, RunningDealer
from tests.support.forked_serve import ServeForker
from tests.support.tokens import MakeToken, run_cli
from tests.support.waits import hold_silent_async

OPEN_HAND = "/fairdeck.v1.DealerService/OpenHand"
BODY = dealer_pb2.OpenHandRequest(deck="standard").SerializeToString()


def _status(trailers: dict[str, bytes]) -> tuple[int, str, float | None]:
    """(grpc-status, ErrorInfo reason, RetryInfo seconds) of a raw response."""
    if "grpc-status-details-bin" not in trailers:  # an OK (or a status with no details)
        return int(trailers["grpc-status"]), "", None
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    reason, retry = "", None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reason = info.reason
        delay = error_details_pb2.RetryInfo()
        if detail.Unpack(delay):
            retry = delay.retry_delay.ToNanoseconds() / 1e9
    assert int(trailers["grpc-status"]) == status.code
    return status.code, reason, retry


# -- a token that is not valid UTF-8 reached the log, and could still be accepted ----------------


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_token_that_is_not_utf8_never_reaches_the_log_and_is_refused(
    tmp_path: Path, log_format: str, serve_forker: ServeForker
) -> None:
    data = tmp_path / "data"
    assert run_cli("init", "--data", str(data)).returncode == 0  # token create never makes a data dir
    made = run_cli("token", "create", "--data", str(data), "--tenant", "acme", "--role", "dealer")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    token_id, secret = split_token(token)  # type: ignore[misc]
    garbage = secrets.token_hex(20)
    headers = {
        # A valid token with one byte after it that is not UTF-8: grpcio decodes it as Latin-1,
        # where 0xA0 is a no-break space, which str.strip() took away: the call was accepted.
        "valid token then 0xA0": b"Bearer " + token.encode() + b"\xa0",
        "valid token then 0x85": b"Bearer " + token.encode() + b"\x85",
        # A token with a byte that is not UTF-8 in its secret.
        "0xFF in the secret": f"Bearer fdk_{token_id}_{garbage}".encode() + b"\xff",
    }
    log_path = tmp_path / "serve.log"
    with DealerProcess(
        data,
        log_path,
        "--require-auth",
        "--log-format",
        log_format,
        "--log-level",
        "DEBUG",
        forker=serve_forker,
    ) as dealer:
        answers = {
            name: _status(rawh2.call(dealer.target, OPEN_HAND, BODY, [(b"authorization", value)]))
            for name, value in headers.items()
        }
        # The same token, sent properly, works: the refusals above are about the bytes.
        with DealerClient(dealer.target, api_token=token, timeout=20) as client:
            client.open_hand()
    out = "\n".join(dealer.rest_of_stdout())
    output = out + log_path.read_text()
    for name, answer in answers.items():
        assert answer == (grpc.StatusCode.UNAUTHENTICATED.value[0], "INVALID_TOKEN", None), name
    for what in (secret, garbage, secret[:16], garbage[:16]):
        assert what not in output, f"{what!r} is in the dealer's output:\n{output[-3000:]}"
    assert "Traceback" not in output
    assert "withheld: it may hold a credential" in output  # grpcio did try to log them


# -- failed authentication was not limited, so spraying cost a lookup a call ---------------------


@pytest.fixture
def limited(data: Path) -> Iterator[RunningDealer]:
    """Credentials required; an address may fail 5 times, then 1 per 1000 s."""
    dealer = RunningDealer(data, require_auth=True, auth_failure_burst=5, auth_failure_rate=0.001)
    dealer.start()
    assert dealer.server is not None
    dealer.server.auth.authenticator.tokens.failures.tarpit = 0.01  # held 10 ms, not 1 s, per refusal
    yield dealer
    dealer.close()


def _lookups(dealer: RunningDealer, delay: float = 0.0) -> list[str]:
    """Record every token id the dealer looks up in storage (a spy on the real storage),
    each lookup taking ``delay`` seconds more (a remote database's round trip)."""
    assert dealer.server is not None
    verifier = dealer.server.auth.authenticator.tokens
    storage, seen = verifier.storage, []
    real = storage.get_token

    async def get_token(token_id: str) -> Any:
        seen.append(token_id)
        await hold_silent_async(delay)  # a remote database's round trip
        return await real(token_id)

    verifier.storage = type("Spied", (), {"get_token": staticmethod(get_token)})()  # type: ignore[assignment]
    return seen


def _sprayed() -> str:
    return f"fdk_{secrets.token_hex(8)}_{'A' * 43}"


def test_token_spraying_is_refused_before_the_lookup_once_an_address_failed_too_often(
    limited: RunningDealer, token_for: MakeToken
) -> None:
    known, fresh = token_for("acme", "dealer"), token_for("acme", "dealer")
    with DealerClient(limited.target, api_token=known, timeout=20) as client:
        client.open_hand()  # verified once: this dealer knows the token
    lookups = _lookups(limited)
    for _ in range(5):
        with DealerClient(limited.target, api_token=_sprayed(), timeout=20) as spray:
            with pytest.raises(Unauthenticated) as refused:
                spray.open_hand()
            assert refused.value.reason == "INVALID_TOKEN"
    assert len(lookups) == 5
    for _ in range(20):
        with (
            DealerClient(limited.target, api_token=_sprayed(), timeout=20) as spray,
            pytest.raises(ResourceExhausted) as limited_call,
        ):
            spray.open_hand()
        assert limited_call.value.reason == Reason.AUTH_RATE_LIMITED
        assert limited_call.value.field == "authorization"
        assert limited_call.value.retry_delay is not None and limited_call.value.retry_delay > 100
    assert len(lookups) == 5, "a sprayed token was looked up after the limit"
    # A token the dealer has verified before still works from the limited address (a tenant
    # behind the same proxy is not locked out), even once its cache entry has expired ...
    with DealerClient(limited.target, api_token=known, timeout=20) as client:
        limited.server.auth.authenticator.tokens.ttl = 0  # type: ignore[union-attr]
        client.open_hand()
        client.open_hand()
    # ... while one it has never seen waits, like any other lookup from there.
    with (
        DealerClient(limited.target, api_token=fresh, timeout=20) as newcomer,
        pytest.raises(ResourceExhausted),
    ):
        newcomer.open_hand()


def test_malformed_authorization_headers_count_as_failures(limited: RunningDealer) -> None:
    refused = [
        _status(rawh2.call(limited.target, OPEN_HAND, BODY, [(b"authorization", value)]))
        for value in [b"Bearer \xff" + bytes(10)] * 5 + [b"Basic abc"] + [b"Bearer " + _sprayed().encode()]
    ]
    unauthenticated = (grpc.StatusCode.UNAUTHENTICATED.value[0], "INVALID_TOKEN", None)
    assert refused[:5] == [unauthenticated] * 5
    for code, reason, retry in refused[5:]:  # garbage too, once the address is over its budget
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], Reason.AUTH_RATE_LIMITED)
        assert retry is not None and retry > 100


def test_a_refusal_for_too_many_failures_is_held_before_it_is_answered(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tarpit: a sprayer that waits for its answers gets a few a second. Held by an asyncio
    # sleep (recorded here, not timed), so the dealer spends nothing on it meanwhile.
    from fairdeck_server.policy import auth

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(auth.asyncio, "sleep", sleep)
    verifier = auth.TokenVerifier(
        storage=None,  # type: ignore[arg-type]  # never reached: refused before any lookup
        failures=auth.FailureLimiter(rate=0.5, burst=1, clock=lambda: 0.0, tarpit=1.0),
    )
    verifier.failures.failed("10.0.0.7")
    with pytest.raises(DealerError) as refused:
        asyncio.run(verifier.verify(_sprayed(), "10.0.0.7"))
    assert (refused.value.reason, refused.value.retry_delay, slept) == (Reason.AUTH_RATE_LIMITED, 1.0, [1.0])
    verifier.failures.tarpit = 5.0
    with pytest.raises(DealerError) as refused:
        asyncio.run(verifier.verify("not even a token", "10.0.0.7"))
    assert (refused.value.reason, refused.value.retry_delay, slept) == (
        Reason.AUTH_RATE_LIMITED,
        0.0,
        [1.0, 2.0],
    )


def test_the_failure_limit_is_per_address_and_off_at_rate_zero(data: Path, token_for: MakeToken) -> None:
    assert peer_address("ipv4:127.0.0.1:50000") == peer_address("ipv4:127.0.0.1:50001") == "127.0.0.1"
    assert peer_address("ipv6:[2001:db8::1]:1") == peer_address("ipv6:%5B2001:db8::ffff%5D:2")
    assert peer_address("ipv6:[2001:db8:0:1::1]:1") != peer_address("ipv6:[2001:db8::1]:1")
    dealer = RunningDealer(data, require_auth=True, auth_failure_rate=0, auth_failure_burst=1)
    dealer.start()
    try:
        for _ in range(10):
            with DealerClient(dealer.target, api_token=_sprayed(), timeout=20) as spray:
                with pytest.raises(FairdeckError) as refused:
                    spray.open_hand()
                assert isinstance(refused.value, Unauthenticated), refused.value
    finally:
        dealer.close()


# -- at the gRPC edge: a huge text seed was decoded into a str before being refused -------------


class _SeedOnTheWire:
    """Answers what the servicer may ask of a ClientSeed before deciding; its text may not be read."""

    def __init__(self, size: int) -> None:
        self.size = size

    def WhichOneof(self, name: str) -> str:
        return "text"

    def ByteSize(self) -> int:
        return self.size

    @property
    def text(self) -> str:
        raise AssertionError("the seed's text was decoded before its size was checked")


def test_a_huge_text_seed_is_refused_on_its_wire_size_before_its_text_is_decoded() -> None:
    with pytest.raises(DealerError) as refused:
        client_seeds([dealer_pb2.ClientSeed(text="ok"), _SeedOnTheWire(4 * 1024 * 1024)])  # type: ignore[list-item]
    assert (refused.value.reason, refused.value.field) == ("INVALID_CLIENT_SEED", "client_seeds[1]")
    widest = "\U0010ffff" * MAX_CLIENT_SEED_CHARS  # the longest text the seed rule may accept: read
    assert client_seeds([dealer_pb2.ClientSeed(text=widest)]) == [widest]


def test_a_4_mib_request_is_refused_by_the_transport_before_it_is_parsed(
    limited: RunningDealer, token_for: MakeToken
) -> None:
    """max_request_bytes (512 KiB) sits below the 4 MiB response limit: gRPC refuses a 4 MiB
    request on the transport, so the event loop never parses it (bench/README.md, attack a)."""
    token = token_for("acme", "dealer")
    text = "e\u0301" * ((4 * 1024 * 1024 - 1024) // 3)
    request = dealer_pb2.DealNewHandRequest(deck="standard", client_seeds=[dealer_pb2.ClientSeed(text=text)])
    with (
        grpc.insecure_channel(
            limited.target, options=[("grpc.max_send_message_length", 8 * 1024 * 1024)]
        ) as channel,
        pytest.raises(grpc.RpcError) as refused,
    ):
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        stub.DealNewHand(request, metadata=(("authorization", f"Bearer {token}"),), timeout=30)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
    assert "larger than max" in (refused.value.details() or "")  # type: ignore[attr-defined]


def test_a_text_seed_just_under_the_request_limit_is_invalid_argument_from_the_real_dealer(
    limited: RunningDealer, token_for: MakeToken
) -> None:
    token = token_for("acme", "dealer")
    text = "e\u0301" * ((512 * 1024 - 1024) // 3)
    request = dealer_pb2.DealNewHandRequest(deck="standard", client_seeds=[dealer_pb2.ClientSeed(text=text)])
    with grpc.insecure_channel(limited.target) as channel, pytest.raises(grpc.RpcError) as refused:
        stub = dealer_pb2_grpc.DealerServiceStub(channel)
        stub.DealNewHand(request, metadata=(("authorization", f"Bearer {token}"),), timeout=30)
    trailers = {k: v for k, v in refused.value.trailing_metadata() or ()}  # type: ignore[attr-defined]
    trailers["grpc-status"] = str(refused.value.code().value[0]).encode()  # type: ignore[attr-defined]
    assert _status(trailers)[:2] == (grpc.StatusCode.INVALID_ARGUMENT.value[0], "INVALID_CLIENT_SEED")


def test_concurrent_sprayers_cannot_look_up_more_than_the_budget(limited: RunningDealer) -> None:
    # Each lookup is counted as a failure before it starts, so 40 calls in flight at once cannot
    # all pass the check while the first lookups are running (here 50 ms each, as over a network).
    lookups = _lookups(limited, delay=0.05)

    async def spray() -> list[grpc.StatusCode]:
        async with grpc.aio.insecure_channel(limited.target) as channel:
            stub = dealer_pb2_grpc.DealerServiceStub(channel)

            async def one() -> grpc.StatusCode:
                metadata = (("authorization", f"Bearer {_sprayed()}"),)
                try:
                    await stub.GetHand(dealer_pb2.GetHandRequest(hand_id="x"), metadata=metadata)
                except grpc.aio.AioRpcError as e:
                    return e.code()
                return grpc.StatusCode.OK

            return await asyncio.gather(*[one() for _ in range(40)])

    codes = asyncio.run(spray())
    assert codes.count(grpc.StatusCode.UNAUTHENTICATED) == 5 == len(lookups)
    assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 35


def test_a_valid_token_gives_back_the_failure_counted_before_its_lookup(
    limited: RunningDealer, token_for: MakeToken
) -> None:
    def answer(token: str) -> str:
        with DealerClient(limited.target, api_token=token, timeout=20) as client:
            try:
                client.open_hand()
            except FairdeckError as e:
                return e.reason
            return "OK"

    fresh = token_for("acme", "dealer")
    assert [answer(_sprayed()) for _ in range(4)] == ["INVALID_TOKEN"] * 4
    assert answer(fresh) == "OK"  # first use: looked up, counted in advance, given back
    assert [answer(_sprayed()) for _ in range(2)] == ["INVALID_TOKEN", Reason.AUTH_RATE_LIMITED]
