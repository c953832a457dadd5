"""Connections are bounded: one that never finishes the HTTP/2 preface and settings, one that sits
idle, one whose headers never end and one whose request body never comes are all closed after
their bound, and one client address keeps at most max_connections_per_peer connections. A real
`fairdeck serve`, raw sockets speaking as little HTTP/2 as each case needs (rawh2.py), and the real
SDK to show that an ordinary client does not notice."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from fairdeck.client import DealerClient
from fairdeck.client.exceptions import DeadlineExceeded
from fairdeck_server.edge.deadline import STREAM_RUNS
from tests.support import rawh2
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.raw_connections import closed_after, in_threads
from tests.support.speed import scaled
from tests.support.waits import outlast, pace, wait_for

SETTINGS = rawh2._frame(rawh2.SETTINGS, 0, 0)
HEADERS = b"".join(
    rawh2._literal(name, value)
    for name, value in (
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/fairdeck.v1.DealerService/GetHand"),
        (b":authority", b"x"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    )
)


@pytest.mark.paired  # waits out the connection bounds
def test_slow_and_idle_connections_are_closed_after_their_bound(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    # A 0.3 s default deadline makes the age's grace (STREAM_RUNS + 1 deadlines) 3.3 s, not 11 s:
    # still 2.7 s past a grace of one deadline (the bug), and the ordinary client deals again
    # where the deadline cuts it.
    # The age is three idle bounds: an idle close that a loaded machine makes late (the dealer's
    # loop turns late) still comes well before the age's (it had 1.6 s with an age of 4 s).
    handshake, idle, age, deadline = 1.0, 2.0, 6.0, 0.3
    grace = (STREAM_RUNS + 1) * deadline
    with DealerProcess(
        tmp_path / "d",
        tmp_path / "stderr",
        "--handshake-timeout", str(handshake), "--connection-idle-timeout", str(idle),
        "--max-connection-age", str(age), "--default-deadline", str(deadline),
        forker=serve_forker,
    ) as dealer:  # fmt: skip
        port = dealer.port
        body_never = [rawh2.PREFACE, SETTINGS, rawh2._frame(rawh2.HEADERS, rawh2.END_HEADERS, 1, HEADERS)]
        ordinary: list[str] = []

        def an_ordinary_client() -> float | None:
            """An ordinary client across the idle bound: its channel reconnects by itself. It runs
            beside the raw connections (its own connection), not after them."""
            with DealerClient(dealer.target) as client:
                ordinary.append(wait_for("a hand dealt", lambda: _dealt(client), timeout=30, every=0))
                outlast(idle + 1)  # past the idle bound
                ordinary.append(wait_for("a hand dealt", lambda: _dealt(client), timeout=30, every=0))
            return 0.0

        times = in_threads(
            {
                "nothing": lambda: closed_after(port, [], 20),
                "half a preface": lambda: closed_after(port, [rawh2.PREFACE[:10]], 20),
                "preface, no settings": lambda: closed_after(port, [rawh2.PREFACE], 20),
                "idle": lambda: closed_after(port, [rawh2.PREFACE, SETTINGS], 20),
                "headers never end": lambda: closed_after(
                    port, [rawh2.PREFACE, SETTINGS, rawh2._frame(rawh2.HEADERS, 0, 1, HEADERS)], 20
                ),
                "body never comes": lambda: closed_after(port, body_never, 20),
                "ordinary client": an_ordinary_client,
            }
        )
    assert len(ordinary) == 2 and ordinary[0] != ordinary[1], (ordinary, times)
    assert all(t is not None for t in times.values()), times
    for case in ("nothing", "half a preface", "preface, no settings"):
        assert times[case] < age, (case, times)  # the handshake bound, 1 s
    for case in ("idle", "headers never end"):
        assert idle - 0.5 < times[case] < 0.9 * age, (case, times)  # the idle bound, before the age
    # The age bound (gRPC jitters it by 10%), then STREAM_RUNS + 1 default deadlines of grace: a
    # stream that began before the GOAWAY ends by its own bound first (edge/deadline.py).
    assert 0.9 * age + grace - 0.5 < times["body never comes"] < 1.1 * age + grace + scaled(4.0), times


def _dealt(client: DealerClient) -> str | None:
    """A hand dealt; None where the dealer cut the call at its short default deadline (a loaded
    machine, not the connection bounds under test: a connection that failed would raise
    Unavailable, which is not retried)."""
    try:
        return client.deal_new_hand().hand.hand_id
    except DeadlineExceeded as e:
        if "server's default deadline" not in str(e):
            raise
        return None


@pytest.mark.serial  # its readings are 2 s connect timeouts, once missed beside load
def test_one_address_keeps_at_most_its_share_of_connections(
    tmp_path: Path, serve_forker: ServeForker
) -> None:
    with DealerProcess(
        tmp_path / "d",
        tmp_path / "stderr",
        "--max-connections-per-peer",
        "4",
        "--connection-idle-timeout",
        "60",
        forker=serve_forker,
    ) as dealer:
        socks = []
        unanswered = 0
        try:
            for _ in range(10):
                try:  # once the address holds 4, the listening socket drops its SYNs
                    sock = socket.create_connection(("127.0.0.1", dealer.port), timeout=2)
                except TimeoutError:
                    unanswered += 1
                    continue
                sock.sendall(rawh2.PREFACE + SETTINGS)
                socks.append(sock)
                pace(0.05)
            open_ = socks

            def down_to_four() -> bool:
                nonlocal open_
                open_ = [s for s in socks if _open(s)]
                return len(open_) <= 4

            wait_for("the connections past 4 to be closed", down_to_four, timeout=15, every=0.2)
            assert len(open_) == 4, f"{len(open_)} of {len(socks)} connections still open"
            assert open_ == socks[:4], "the newest connections are the ones closed"
            assert refused(dealer.port), "a fifth connection is answered"
        finally:
            for s in socks:
                s.close()
    said = dealer.stderr()
    assert f"client 127.0.0.1 held {10 - unanswered} connections, over max_connections_per_peer 4" in said


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except TimeoutError:
        return True


def _open(sock: socket.socket) -> bool:
    """Whether the dealer has not closed ``sock`` (what it sent so far is read and dropped)."""
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


WATCH = b"".join(
    rawh2._literal(name, value)
    for name, value in (
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/grpc.health.v1.Health/Watch"),
        (b":authority", b"x"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    )
)


def _read_frame(sock: socket.socket) -> tuple[int, int, int, bytes]:
    """The next frame: its type, flags, stream and payload."""
    head = rawh2._read_exact(sock, 9)
    payload = rawh2._read_exact(sock, int.from_bytes(head[:3], "big"))
    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload


def test_a_client_that_ignores_the_stream_limit_gets_the_streams_past_it_reset(tmp_path: Path) -> None:
    """A client may open as many calls on one connection as it likes: 30 health Watch streams at
    once, each of them held open by the dealer. With max_streams_per_connection 10, a client that
    ignores the dealer's SETTINGS has the 20 past it reset (REFUSED_STREAM). An ordinary gRPC
    client keeps its calls past the limit until one ends, and none fails (60 GetHand at once on
    each of 63 connections: tests/security/test_pending_calls.py). Not serial: the bar is a count
    of streams."""
    with DealerProcess(
        tmp_path / "d",
        tmp_path / "stderr",
        env={"FAIRDECK_MAX_STREAMS_PER_CONNECTION": "10", "FAIRDECK_MAX_OPEN_STREAMS_PER_PEER": "0"},
    ) as dealer:
        with socket.create_connection(("127.0.0.1", dealer.port), timeout=10) as sock:
            sock.sendall(rawh2.PREFACE + SETTINGS)
            while True:  # the dealer's SETTINGS, acknowledged before any stream
                kind, flags, _, _ = _read_frame(sock)
                if kind == rawh2.SETTINGS and not flags & rawh2.ACK:
                    sock.sendall(rawh2._frame(rawh2.SETTINGS, rawh2.ACK, 0))
                    break
            streams = range(1, 61, 2)
            body = b"\x00\x00\x00\x00\x00"  # an empty HealthCheckRequest
            sock.sendall(
                b"".join(
                    rawh2._frame(rawh2.HEADERS, rawh2.END_HEADERS, s, WATCH)
                    + rawh2._frame(rawh2.DATA, rawh2.END_STREAM, s, body)
                    for s in streams
                )
            )
            answered: set[int] = set()
            refused: set[int] = set()
            while len(answered | refused) < len(streams):
                kind, _, stream, payload = _read_frame(sock)
                if kind == rawh2.HEADERS:
                    answered.add(stream)
                elif kind == rawh2.RST_STREAM and int.from_bytes(payload, "big") == 7:  # REFUSED_STREAM
                    refused.add(stream)
        assert (len(answered), len(refused)) == (10, 20), (sorted(answered), sorted(refused))
