"""The transport's settings: TLS server credentials from PEM files, and gRPC's own queue of
new calls. Whether plain text may listen somewhere is addresses.check_listen's rule."""

from __future__ import annotations

from pathlib import Path

import grpc

from fairdeck_server.refusals import StartupRefused

__all__ = ["TlsConfigError", "server_credentials"]


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


MAX_PENDING_CALLS = 10_000
"""Calls gRPC may hold for the server before our handlers take them (see TRANSPORT_OPTIONS)."""


TRANSPORT_OPTIONS: tuple[tuple[str, int], ...] = (
    # gRPC core queues each new call until grpc.aio's accept loop takes it, one per turn
    # of the event loop. Past grpc.server.max_pending_requests (default 1,000, then
    # randomly up to the hard limit of 3,000) it drops calls: the client gets CANCELLED
    # with no message, and no handler, interceptor or metric ever sees them. 2,500
    # concurrent GetHand calls on one channel lost 282-432 that way. A queued call costs
    # little (its metadata and at most a flow-control window of request bytes) and waits
    # under its own deadline, so the queue is made large, with no random early drop.
    # A per-connection stream cap (grpc.max_concurrent_streams) is no cure: streams the
    # client opens before it reads the server's SETTINGS are reset (UNAVAILABLE).
    ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
    ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_CALLS),
)
"""gRPC server options for the transport's own queue of new calls."""
