"""The transport's settings: TLS server credentials from PEM files, gRPC's own queue of new
calls (none dropped for its age), how long a connection may stay (``connection_options``), and
all of gRPC's server options for a config (``grpc_options``). Whether plain text may listen
somewhere is addresses.check_listen's rule. ``aio_server`` makes every gRPC server of fairdeck's
(the dealer's and the co-dealer's), grpcio's own log lines tamed first (grpc_logs.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import grpc

from fairdeck_server.edge.deadline import STREAM_RUNS
from fairdeck_server.edge.grpc_logs import tame_grpc_logs
from fairdeck_server.refusals import StartupRefused

__all__ = ["TlsConfigError", "aio_server", "grpc_options", "server_credentials"]


def aio_server(options: Sequence[tuple[str, Any]], interceptors: Sequence[Any] = ()) -> grpc.aio.Server:
    """A grpc.aio server, made only here: grpcio's log filters are installed first, before it
    can take a call (a metadata value that is not UTF-8, a token, is never logged whole; an
    answer unsent as its call ended is no ERROR), whichever process serves."""
    tame_grpc_logs()
    return grpc.aio.server(interceptors=list(interceptors), options=list(options))


class TransportSettings(Protocol):
    """What ``grpc_options`` reads of the dealer's configuration (``run.config.ServerConfig``
    has them all): named here, so the edge never imports the room that wires it."""

    @property
    def max_request_bytes(self) -> int: ...
    @property
    def max_message_bytes(self) -> int: ...
    @property
    def connection_idle_timeout(self) -> float: ...
    @property
    def handshake_timeout(self) -> float: ...
    @property
    def max_connection_age(self) -> float: ...
    @property
    def default_deadline(self) -> float: ...
    @property
    def max_streams_per_connection(self) -> int: ...


class TlsConfigError(StartupRefused):
    """TLS files that are missing, unreadable, or given without their pair."""


def server_credentials(
    cert: Path | None, key: Path | None, client_ca: Path | None
) -> grpc.ServerCredentials | None:
    """Credentials for ``add_secure_port``; None when TLS is off (no cert and no key).

    With ``client_ca``, clients must present a certificate it signed.
    """
    if cert is None and key is None:
        if client_ca is not None:
            raise TlsConfigError("--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS first)")
        return None
    if cert is None or key is None:
        raise TlsConfigError("give both --tls-cert and --tls-key")
    chain, private_key = _read(cert, "--tls-cert"), _read(key, "--tls-key")
    roots = _read(client_ca, "--tls-client-ca") if client_ca is not None else None
    return grpc.ssl_server_credentials(
        [(private_key, chain)], root_certificates=roots, require_client_auth=roots is not None
    )


def _read(path: Path, flag: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{flag} {path}: {e.strerror or e}") from None
    if b"-----BEGIN " not in data:
        raise TlsConfigError(f"{flag} {path} is not a PEM file")
    return data


MAX_PENDING_CALLS = 4_096
"""Calls gRPC may hold for the server before our handlers take them (see TRANSPORT_OPTIONS): at
least one address's whole burst (64 connections x 50 streams, the defaults), and at about 14 KiB
of gRPC core's memory each, at most 56 MiB when a client resets its streams en masse (a reset
call waits here until taken, no longer counted against its connection): 10,000 let 20,000 Watch
streams cancelled at once spike the dealer's RSS by 145 MiB (bench/README.md, section 20)."""


UNREQUESTED_NEVER_S = 2**31 - 1
"""gRPC's "never" for the seconds a queued call may wait before it is dropped (a C int: 68 years)."""


TRANSPORT_OPTIONS: tuple[tuple[str, int], ...] = (
    # gRPC core queues each new call until grpc.aio's accept loop takes it, one per turn
    # of the event loop. Past grpc.server.max_pending_requests (default 1,000, then
    # randomly up to the hard limit of 3,000) it drops calls: the client gets CANCELLED
    # with no message, and no handler, interceptor or metric ever sees them. 2,500
    # concurrent GetHand calls on one channel lost 282-432 that way. A queued call costs
    # little (its metadata and at most a flow-control window of request bytes) and waits
    # under its own deadline, so the queue is made larger, with no random early drop. The
    # per-connection stream cap (connection_options) bounds what an honest client can queue here
    # (a client keeps its calls past the cap itself), one address's connections are capped too,
    # and a client that resets its calls fills the queue with no stream cap to stop it: so it
    # is not larger than that memory allows.
    ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
    ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_CALLS),
    # A call queued longer than grpc.server_max_unrequested_time_in_server (default 30 s) is
    # dropped when the server next takes one up: CANCELLED, unseen. Only a starved event loop
    # queues a call that long, and then the call is as much the dealer's as one in its own
    # queues (fair.py): it is taken up and answered, served or refused with a reason. What
    # bounds its wait is what bounds any call's: its deadline, its client's cancel, its
    # connection's age, and the queue's size above.
    ("grpc.server_max_unrequested_time_in_server", UNREQUESTED_NEVER_S),
)
"""gRPC server options for the transport's own queue of new calls."""


KEEPALIVE_SECONDS = 60.0
"""The server pings a connection that sent nothing for this long, to find peers that are gone."""
KEEPALIVE_TIMEOUT_SECONDS = 20.0


def _ms(seconds: float) -> int:
    """A duration option in milliseconds; 0 (off) is gRPC's "never" (INT_MAX)."""
    return int(seconds * 1000) if seconds > 0 else 2**31 - 1


def connection_options(
    *, idle: float, handshake: float, age: float, age_grace: float, max_connections: int, max_streams: int = 0
) -> tuple[tuple[str, int], ...]:
    """gRPC's own bounds on connections (measured on grpcio 1.85, tests/security/test_connections.py):

    - ``handshake``: a connection must finish its TLS handshake, the HTTP/2 preface and its first
      SETTINGS within it, or it is closed (``grpc.server_handshake_timeout_ms``; gRPC's default
      is 120 s). A client that connects and sends nothing, or half a preface, goes after it.
    - ``idle``: a connection with no call in flight for this long is sent GOAWAY and closed
      (``grpc.max_connection_idle_ms``; default never). Headers that never end (no END_HEADERS)
      make no call, so such a connection is idle too.
    - ``age``: any connection is sent GOAWAY after it, and closed ``age_grace`` later, calls in
      flight or not; it bounds a call whose headers came and whose body never does (gRPC reads
      a unary request before any handler of ours runs, so no deadline of ours covers that wait).
    - ``max_connections``: connections this process accepts at once, in all
      (``grpc.max_allowed_incoming_connections``); past it a new one is closed at once. What one
      client address may hold is connections.ConnectionWarden's, outside gRPC.
    - keepalive pings find peers that vanished without closing (gRPC's own defaults: 2 hours).
    - ``max_streams``: calls open at once on one connection (``grpc.max_concurrent_streams``,
      HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS), so that what a connection holds is bounded; a
      gRPC client queues its calls past it. With gRPC's "overload protection" (its default) a
      stream still counts until the application has freed it, and a burst on a new connection
      had 0.2-3% of its calls reset (REFUSED_STREAM, UNAVAILABLE to the client): it is off, so
      only streams open under HTTP/2 count, and none of 2,500 at once was reset. The price: a
      stream the client resets stops counting before gRPC has freed it, so a client resetting
      as fast as it opens is bounded by gRPC's queue (MAX_PENDING_CALLS), not by this.
    """
    return (
        ("grpc.server_handshake_timeout_ms", _ms(handshake)),
        ("grpc.max_connection_idle_ms", _ms(idle)),
        ("grpc.max_connection_age_ms", _ms(age)),
        ("grpc.max_connection_age_grace_ms", _ms(age_grace)),
        ("grpc.keepalive_time_ms", _ms(KEEPALIVE_SECONDS)),
        ("grpc.keepalive_timeout_ms", _ms(KEEPALIVE_TIMEOUT_SECONDS)),
        *((("grpc.max_allowed_incoming_connections", max_connections),) if max_connections > 0 else ()),
        *(
            (("grpc.max_concurrent_streams", max_streams), ("grpc.http.overload_protection", 0))
            if max_streams > 0
            else ()
        ),
    )


def grpc_options(
    config: TransportSettings, *, reuseport: bool, max_connections: int
) -> list[tuple[str, int]]:
    """gRPC's server options for ``config``: each value a C int, as option_ranges.py keeps them."""
    # A request is held to the lower of the two limits (0 is no limit).
    request_bytes = min((b for b in (config.max_request_bytes, config.max_message_bytes) if b), default=-1)
    return [
        ("grpc.max_receive_message_length", request_bytes),
        ("grpc.max_send_message_length", config.max_message_bytes or -1),
        # One process per port, except the workers of one dealer (processes.py).
        ("grpc.so_reuseport", 1 if reuseport else 0),
        *TRANSPORT_OPTIONS,  # no call dropped unseen (edge/transport.py)
        *connection_options(
            idle=config.connection_idle_timeout,
            handshake=config.handshake_timeout,
            age=config.max_connection_age,
            # A stream in flight at GOAWAY ends by its own bound first (deadline.py).
            age_grace=config.default_deadline * (STREAM_RUNS + 1) or 30.0,
            max_connections=max_connections,
            max_streams=config.max_streams_per_connection,
        ),
    ]
