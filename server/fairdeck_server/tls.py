"""TLS for the dealer: server credentials from PEM files, and the rule that
plain text is for loopback only.

A dealer listening on anything but loopback (``0.0.0.0`` and ``[::]``
included) without TLS would send seeds, cards and API tokens across the
network in the clear, so ``check_listen`` refuses to start it unless the
operator says ``insecure`` (e.g. TLS is terminated by a sidecar on the same
pod). With a client CA the dealer requires a client certificate (mTLS), and
``auth`` maps it to a tenant and role.
"""

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
